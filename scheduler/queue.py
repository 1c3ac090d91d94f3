"""Queue order, starvation reservations, fair sharing of borrowed capacity, and the
human-readable reasons for waiting."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from .cells import Chain
from .placement import Blocked, PodNeed
from .quota import VcState
from .spec import GangRequest


def cycle_order(gang: GangRequest) -> tuple[int, float, str]:
    """Higher priority first, then first come first served, then by id for ties."""
    return (-gang.priority, gang.submitted_at, gang.job_id)


STARVATION, PREEMPTION = "starvation", "preemption"


@dataclass(frozen=True)
class Reservation:
    """Devices held for a gang: a starving one (``until`` is when the jobs on them reach
    their declared maximum runtime; ``None`` when some of them declared none, in which
    case no other job may backfill into the devices), or a preempting one (``victims``:
    the jobs it waits for; no other job may use the devices)."""

    job_id: str
    devices: tuple[tuple[int, frozenset[int]], ...]  # (node cell id, device indices)
    nodes: tuple[str, ...]
    until: float | None
    kind: str = STARVATION
    victims: tuple[str, ...] = ()
    priority: int = 0
    # A starving gang's VC and the leaf cells of its quota it holds, per SKU: other gangs
    # of the VC may use only what is left, unless they end before ``until``.
    vc: str | None = None
    leaves: tuple[tuple[str, int], ...] = ()

    def admits(self, gang: GangRequest, now: float) -> bool:
        """A backfill may use the devices only if it surely ends before they are needed;
        a gang of higher priority than a preempting one may take its devices (the
        preemption is then abandoned: it stopped no one yet, or only jobs already going)."""
        if self.kind == PREEMPTION:
            return gang.priority > self.priority
        return self.until is not None and gang.max_runtime is not None and now + gang.max_runtime <= self.until


class ReservationBook:
    """The cycle's reservations, their devices merged as they come and go: nearly every
    gang must keep out of all of them but its own, and looking that up must not cost a
    merge of every reservation per gang (a wave of preemptions holds hundreds)."""

    def __init__(self, items: Iterable[Reservation] = ()) -> None:
        self._items: list[Reservation] = []
        self._held: dict[int, dict[int, int]] = {}  # node cell id -> device -> reservations holding it
        self.version = 0
        for r in items:
            self.append(r)

    def __iter__(self):
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def append(self, r: Reservation) -> None:
        self._items.append(r)
        for node_id, devices in r.devices:
            held = self._held.setdefault(node_id, {})
            for d in devices:
                held[d] = held.get(d, 0) + 1
        self.version += 1

    def keep(self, wanted) -> None:
        """Drop every reservation for which ``wanted(r)`` is false."""
        gone = [r for r in self._items if not wanted(r)]
        if not gone:
            return
        self._items = [r for r in self._items if wanted(r)]
        for r in gone:
            for node_id, devices in r.devices:
                held = self._held[node_id]
                for d in devices:
                    held[d] -= 1
                    if not held[d]:
                        del held[d]
                if not held:
                    del self._held[node_id]
        self.version += 1

    def quota_held(self, gang: GangRequest, now: float) -> tuple[dict[str, int], Reservation | None]:
        """Leaf cells of the gang's VC's quota, per SKU, that other starving gangs of the
        VC hold against it (it would not end before they need them), and the first of
        those reservations."""
        held: dict[str, int] = {}
        first = None
        for r in self._items:
            if r.kind != STARVATION or r.vc != gang.vc or r.job_id == gang.job_id or r.admits(gang, now):
                continue
            first = first or r
            for sku, n in r.leaves:
                held[sku] = held.get(sku, 0) + n
        return held, first

    def blocked_for(
        self, gang: GangRequest, now: float, backfill: bool = True, takeover: bool = True
    ) -> tuple[tuple, Blocked]:
        """The devices a gang must keep out of (all reservations but its own and, with
        ``backfill``, those that admit it; without ``takeover``, preemptions' admit no
        one), and a key naming that set."""
        if not self._items:
            return (), {}
        own = [r for r in self._items if r.job_id == gang.job_id]

        def admitted(r: Reservation) -> bool:
            return r.admits(gang, now) and (takeover or r.kind != PREEMPTION)

        if backfill and any(admitted(r) for r in self._items if r.job_id != gang.job_id):
            return _merge(r for r in self._items if r.job_id != gang.job_id and not admitted(r))
        if len(own) == len(self._items):
            return (), {}
        return ("all", self.version, gang.job_id if own else ""), _AllBut(self._held, own)


class _AllBut(Mapping):
    """Node cell id -> reserved devices, leaving out some reservations' own."""

    def __init__(self, held: dict[int, dict[int, int]], own: list[Reservation]) -> None:
        self._held = held
        self._own: dict[int, dict[int, int]] = {}
        for r in own:
            for node_id, devices in r.devices:
                mine = self._own.setdefault(node_id, {})
                for d in devices:
                    mine[d] = mine.get(d, 0) + 1
        self._cache: dict[int, frozenset[int]] = {}

    def __getitem__(self, node_id: int) -> frozenset[int]:
        found = self._cache.get(node_id)
        if found is None:
            held = self._held.get(node_id)
            if not held:
                raise KeyError(node_id)
            mine = self._own.get(node_id, {})
            found = self._cache[node_id] = frozenset(d for d, n in held.items() if n > mine.get(d, 0))
        if not found:
            raise KeyError(node_id)
        return found

    def get(self, node_id, default=None):
        try:
            return self[node_id]
        except KeyError:
            return default

    def __iter__(self):
        return (node_id for node_id in self._held if self.get(node_id))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return True


def overlapping(reservations: Iterable[Reservation], devices: set[tuple[int, int]], priority: int) -> list[Reservation]:
    """Preemption reservations of lower priority than ``priority`` that hold any of ``devices``."""
    return [
        r for r in reservations
        if r.kind == PREEMPTION and r.priority < priority
        and any((node_id, d) in devices for node_id, ds in r.devices for d in ds)
    ]


def _merge(reservations: Iterable[Reservation]) -> tuple[tuple[str, ...], dict[int, frozenset[int]]]:
    ids = []
    merged: dict[int, frozenset[int]] = {}
    for r in reservations:
        ids.append(r.job_id)
        for node_id, devices in r.devices:
            merged[node_id] = merged.get(node_id, frozenset()) | devices
    return tuple(ids), merged


def borrow_share(vc: VcState, cohort_capacity: dict[str, int]) -> float:
    """Weighted dominant share of what a VC borrows from its cohort."""
    share = 0.0
    for sku, leaves in vc.borrowed_leaves.items():
        capacity = cohort_capacity.get(sku, 0)
        if leaves and capacity:
            share = max(share, leaves / capacity)
    return share / vc.spec.weight


# --- reasons -------------------------------------------------------------------------


def clock(t: float, now: float) -> str:
    stamp = datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M UTC")
    return f"~{stamp} (in {max(0, round((t - now) / 60))} min)"


def describe_pods(needs: list[PodNeed], chain: Chain) -> str:
    counts: dict[int, int] = {}
    for need in needs:
        counts[need.leaf_cells] = counts.get(need.leaf_cells, 0) + 1
    parts = " + ".join(f"{n} × {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[0]))
    if all(k == chain.node_size for k in counts):
        where = "on whole nodes" if len(needs) > 1 else "on a whole node"
    else:
        where = "on one node each" if len(needs) > 1 else "on one node"
    return f"{parts} {chain.sku.name} {where}"


def bad_nodes_note(names: list[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    verb = "is" if len(names) == 1 else "are"
    return f"; node{'s' if len(names) > 1 else ''} {shown} {verb} not Ready"
