"""Queue order, starvation reservations, fair sharing of borrowed capacity, and the
human-readable reasons for waiting."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from .cells import Chain
from .placement import PodNeed
from .quota import VcState
from .spec import GangRequest


def cycle_order(gang: GangRequest) -> tuple[int, float, str]:
    """Higher priority first, then first come first served, then by id for ties."""
    return (-gang.priority, gang.submitted_at, gang.job_id)


@dataclass(frozen=True)
class Reservation:
    """Devices held for a starving gang. ``until`` is when the jobs on them reach their
    declared maximum runtime; ``None`` when some of them declared none, in which case no
    other job may backfill into the devices."""

    job_id: str
    devices: tuple[tuple[int, frozenset[int]], ...]  # (node cell id, device indices)
    nodes: tuple[str, ...]
    until: float | None

    def admits(self, gang: GangRequest, now: float) -> bool:
        """A backfill may use the devices only if it surely ends before they are needed."""
        return (
            self.until is not None
            and gang.max_runtime is not None
            and now + gang.max_runtime <= self.until
        )


def blocked_for(gang: GangRequest, reservations: Iterable[Reservation], now: float) -> tuple[
    tuple[str, ...], dict[int, frozenset[int]]
]:
    """The reservations a gang must keep out of, and the devices they cover."""
    return _merge(r for r in reservations if r.job_id != gang.job_id and not r.admits(gang, now))


def reserved_by_others(gang: GangRequest, reservations: Iterable[Reservation]) -> dict[int, frozenset[int]]:
    """Every device reserved for another gang, backfill or not: where a new reservation
    must not go."""
    return _merge(r for r in reservations if r.job_id != gang.job_id)[1]


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
