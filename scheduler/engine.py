"""The engine: the one object the control plane talks to.

It owns the cell model (:mod:`.cells`), the VC quotas (:mod:`.quota`) and the running
jobs (:mod:`.ledger`); a cycle validates the queue (:mod:`.validation`), orders it
(:mod:`.queue`), places gangs (:mod:`.placement`), preempting when allowed
(:mod:`.preemption`), and explains every wait.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from .budgets import BudgetGate, GpuHourBudget
from .cells import Chain, Topology, collector_paused
from .decisions import (
    Allocation,
    CycleResult,
    NodeStatus,
    Preemption,
    Rejection,
    ReservationInfo,
    RestoreReport,
    VcStatus,
    WaitInfo,
)
from .errors import InvalidRequestError
from .ledger import PREEMPTING, RUNNING, TERMINATING, Ledger, RunningJob
from .pending import PendingPreemption, plan_scopes
from .placement import NO_BLOCK, Blocked, Placer, PodNeed, Shortage
from .preemption import VictimSearch, candidates
from .queue import (
    PREEMPTION,
    STARVATION,
    Reservation,
    ReservationBook,
    bad_nodes_note,
    borrow_share,
    clock,
    cycle_order,
    describe_pods,
    overlapping,
)
from .quota import VcState, check_safety, resolve_quotas
from .restore import Restorer
from .spec import ClusterSpec, GangRequest, VirtualClusterSpec
from .status import node_status, vc_status
from .validation import GangOption, RequestChecker

DEFAULT_STARVATION_THRESHOLD = 3600.0
# The occupant of devices that pods the engine does not manage hold (``set_node_foreign_use``).
FOREIGN = "<foreign>"


@dataclass
class _Admission:
    job: RunningJob
    preemptions: tuple[Preemption, ...]


@dataclass
class _Preempting:
    """A gang waiting for its preemption; ``preemptions``: the victims this cycle tells
    to stop (when it commits)."""

    pending: PendingPreemption
    preemptions: tuple[Preemption, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _Shortfall:
    """A gang that did not fit, to be explained once the cycle is over, so that the
    numbers in the reason are those the user sees until the next cycle."""

    gang: GangRequest
    option: GangOption
    shortage: Shortage
    borrowing: bool
    reservation_ids: tuple[str, ...]
    blocked: Blocked


class _HeldBack(str):
    """A gang waiting because starving gangs of its VC hold the quota it would take: it
    reserves nothing of its own meanwhile (it could not use it before they run)."""


_Wait = str | _Shortfall | _Preempting


class Engine:
    """Gang scheduling over HiveD-style cells.

    ``schedule`` decides in one call: placements, preemptions and wait reasons. A gang
    that must preempt holds a reservation (see :mod:`.pending`): the cycle that decides
    it only plans it; the gang's next turn, if the victims still make room, tells them to
    stop (``CycleResult.preemptions``; lazily preempted ones are demoted and keep
    running) and the gang waits, holding its quota and devices, until every stopped
    victim has been ``release``d — the caller does that once the victims' pods are
    really gone — and is placed at its next turn after that.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        vcs: Sequence[VirtualClusterSpec],
        *,
        starvation_threshold: float = DEFAULT_STARVATION_THRESHOLD,
    ) -> None:
        with collector_paused():
            self.topology = Topology(cluster)
            self.vcs: dict[str, VcState] = resolve_quotas(self.topology, vcs)
        check_safety(self.topology, self.vcs)
        # What the configuration holds that the engine ignores (unused cell types).
        self.warnings: tuple[str, ...] = tuple(self.topology.warnings)
        self.ledger = Ledger(self.topology, self.vcs)
        self.placer = Placer(self.topology, self.ledger)
        self.starvation_threshold = starvation_threshold
        self._sku_order = [s.name for s in cluster.skus]
        self._gpus_per_leaf = {s.name: s.gpu for s in cluster.skus}
        self.requests = RequestChecker(self.topology, self.vcs, self._sku_order)
        self._failures: dict[tuple, tuple[int, str]] = {}
        self.pending: dict[str, PendingPreemption] = {}
        self._candidates: dict[tuple, list[RunningJob]] = {}
        self._running_at: dict[tuple, int] = {}
        self._cycle_reservations: ReservationBook = ReservationBook()
        # Devices others' pods hold, by node: what was asked, and the nodes that could not
        # give it all yet (their devices were the engine's jobs'; taken as those leave).
        self._foreign: dict[str, int] = {}
        self._foreign_short: set[str] = set()

    # --- cluster events --------------------------------------------------------------

    def knows_node(self, node: str) -> bool:
        """Whether ``node`` (a host or a node's address) is one of the cluster's physical cells."""
        try:
            self.topology.nodes_of(node)
        except ValueError:
            return False
        return True

    def set_node_health(self, node: str, healthy: bool) -> None:
        """Bad nodes get no new pods; pods already there keep their placement. ``node``: a
        host (all its SKUs' nodes) or a node's address."""
        for target in self.topology.nodes_of(node):
            self.topology.set_health(target, healthy)
        if healthy:
            self.ledger.generation += 1

    def set_node_foreign_use(self, node: str, devices: int) -> None:
        """``devices`` of the node are held by pods the engine does not manage (another
        scheduler's, a daemon's): they show as used (by ``FOREIGN``) and get no pod. Taken
        from the node's free devices, highest index first (on a host carrying several
        SKUs, from its highest device range down); while the engine's own jobs hold more
        than the rest, the remainder is taken as they leave. Idempotent."""
        left = max(0, int(devices))
        for target in reversed(self.topology.nodes_of(node)):
            wanted = min(left, target.size)
            left -= wanted
            name = target.name
            if wanted == self._foreign.get(name, 0) and name not in self._foreign_short:
                continue
            if wanted:
                self._foreign[name] = wanted
            else:
                self._foreign.pop(name, None)
            self._settle_foreign(target)

    def _settle_foreign(self, target) -> None:
        wanted = self._foreign.get(target.name, 0)
        held = [d for d, job in enumerate(target.jobs) if job == FOREIGN]
        freed = held[: max(0, len(held) - wanted)]
        for d in freed:
            self.topology.vacate(target, (d,))
        if len(held) < wanted:
            free = [d for d in reversed(range(target.size)) if target.jobs[d] is None]
            for d in free[: wanted - len(held)]:
                self.topology.occupy(target, (d,), FOREIGN, False)
        self.topology.commit()
        if sum(1 for job in target.jobs if job == FOREIGN) < wanted:
            self._foreign_short.add(target.name)
        else:
            self._foreign_short.discard(target.name)
        if freed:
            self.ledger.generation += 1

    def release(self, job_id: str) -> None:
        """Free a finished or deleted job's cells (a preempted job's once its pods are
        gone); a preempting gang's release abandons its preemption. Unknown ids are
        ignored (idempotent)."""
        pending = self.pending.get(job_id)
        if pending is not None:
            self._abandon(pending)
            return
        job = self.ledger.jobs.get(job_id)
        if job is not None:
            self.ledger.remove(job)
            self.topology.commit()
            self._gone(job_id)
            for name in sorted(self._foreign_short):
                self._settle_foreign(self.topology.nodes[name])

    def _gone(self, job_id: str) -> None:
        """A job left: preemptions waiting for it wait for it no more."""
        for pending in self.pending.values():
            if job_id in pending.victims:
                pending.victims.remove(job_id)

    def _abandon(self, pending: PendingPreemption) -> None:
        """Drop a preemption: planned, its victims never knew; committed, they keep
        stopping, and the gang's quota is free again."""
        del self.pending[pending.job_id]
        if pending.job is not None:
            self.ledger.remove(pending.job)
            self.topology.commit()

    def _override(
        self, gang: GangRequest, pods, reservations: ReservationBook, pending: PendingPreemption | None = None
    ) -> None:
        """A gang placed (or preempting) on devices a lower-priority gang had reserved for
        its preemption, or preempting a job that one planned to preempt, takes them over:
        that preemption is abandoned and decided again at its gang's turn."""
        if pods is not None:
            devices = {(p.node.cell.id, d) for p in pods for d in p.devices}
        elif pending is not None:
            locate = self.topology.locate
            devices = {
                (node.cell.id, d) for p in pending.pods for node, own in (locate(p.node, p.devices),) for d in own
            }
        else:
            return
        for r in overlapping(reservations, devices, gang.priority):
            if r.job_id in self.pending and r.job_id != gang.job_id:
                self._drop_pending(self.pending[r.job_id], reservations)
        if pending is not None:
            # Victims are running jobs, so only planned preemptions share them.
            victims = set(pending.victims)
            for job_id in sorted(self.pending):
                other = self.pending.get(job_id)
                if (
                    other is not None and job_id != gang.job_id and other.priority < gang.priority
                    and not victims.isdisjoint(other.victims)
                ):
                    self._drop_pending(other, reservations)

    def _claimed(self, priority: int | None) -> set[str]:
        """Victims of preemptions a gang of ``priority`` may not take over (``None``: a
        borrowing gang, which takes over none)."""
        return {v for p in self.pending.values() if priority is None or p.priority >= priority for v in p.victims}

    # --- requests --------------------------------------------------------------------

    def check_request(self, gang: GangRequest) -> None:
        """Raise :class:`InvalidRequestError` if no state of the cluster could run it."""
        self.requests.resolve(gang)

    # --- the cycle ---------------------------------------------------------------------

    def schedule(
        self, queue: Sequence[GangRequest], now: float, *, budgets: Mapping[str, GpuHourBudget] | None = None
    ) -> CycleResult:
        """One scheduling cycle over every waiting gang.

        Order: guaranteed gangs by priority then submission time, within their VC's own
        quota (preempting when allowed); then gangs that may borrow, VC by VC in order of
        weighted dominant borrowed share; then opportunistic gangs. A gang that does not
        fit never blocks the ones behind it, except through a starvation reservation.

        ``budgets`` are the GPU-hour budgets of VCs that have one, by VC name (the control
        plane keeps the accounts): a guaranteed gang that would take its VC past the budget
        waits (:mod:`.budgets`); opportunistic gangs are not gated.
        """
        self._failures = {}
        expired = []
        for job_id in sorted(self.ledger.limited):
            job = self.ledger.limited[job_id]
            ends = job.ends_at()
            if ends is not None and now >= ends:
                self.ledger.remove(job)
                self._gone(job_id)
                expired.append(job_id)
        self.topology.commit()

        rejected: list[Rejection] = []
        ordered: list[tuple[GangRequest, list[GangOption]]] = []
        seen: set[str] = set()
        for gang in sorted(queue, key=cycle_order):
            running = gang.job_id in self.ledger.jobs and gang.job_id not in self.pending
            if running or gang.job_id in seen:
                rejected.append(Rejection(gang.job_id, "jobId", "the job is already running or queued twice"))
                continue
            seen.add(gang.job_id)
            try:
                ordered.append((gang, self.requests.options(gang)))
            except InvalidRequestError as e:
                rejected.append(Rejection(gang.job_id, e.field, e.message))
        self.requests.keep_only(seen)
        gate = BudgetGate(budgets or {}, self._gpus_per_leaf)
        queued = {gang.job_id for gang, _ in ordered}
        for job_id in sorted(self.pending):
            pending = self.pending[job_id]
            # Cancelled, or a node of its reservation went bad: abandoned; a gang still
            # queued decides again below.
            if job_id not in queued or any(not n.healthy for n in pending.nodes(self.topology)):
                self._abandon(pending)

        placements: list[RunningJob] = []
        preemptions: list[Preemption] = []
        reasons: dict[str, _Wait] = {}
        reservations = ReservationBook(self.pending[j].reservation(self.topology) for j in sorted(self.pending))
        self._cycle_reservations = reservations
        borrowers: dict[str, list[tuple[GangRequest, list[GangOption]]]] = {}

        for gang, options in ordered:
            if gang.opportunistic:
                continue
            # A preempting gang passed the gate when it decided; it is charged below.
            refusal = gate.refusal(gang, options[0].needs) if gang.job_id not in self.pending else None
            if refusal is not None:
                reasons[gang.job_id] = refusal
                continue
            pending = self.pending.get(gang.job_id)
            if pending is not None:
                outcome = self._advance(pending, gang, options, reservations, now)
            else:
                outcome = self._admit_guaranteed(gang, options, reservations, now, borrowing=False)
            if isinstance(outcome, _Admission):
                gate.charge(gang, options[0].needs)
                placements.append(outcome.job)
                preemptions.extend(outcome.preemptions)
                self._override(gang, outcome.job.pods, reservations)
                continue
            reasons[gang.job_id] = outcome
            if isinstance(outcome, _Preempting):
                gate.charge(gang, options[0].needs)
                preemptions.extend(outcome.preemptions)
                self._override(gang, None, reservations, outcome.pending)
                continue
            vc = self.vcs[gang.vc]
            if self.requests.lenders[vc.name]:
                borrowers.setdefault(gang.vc, []).append((gang, options))
            needs = options[0].needs
            threshold = vc.spec.starvation_threshold
            if threshold is None:
                threshold = self.starvation_threshold
            if (
                now - gang.submitted_at >= threshold and not isinstance(outcome, _HeldBack)
                and not self._over_user_cap(gang, vc, needs)
            ):
                reservation = self._reserve(gang, needs, reservations, now)
                if reservation is not None:
                    reservations.append(reservation)

        self._borrow_pass(borrowers, reservations, now, placements, preemptions, reasons, gate)

        for gang, options in ordered:
            if not gang.opportunistic:
                continue
            outcome = self._admit_opportunistic(gang, options, reservations, now)
            if isinstance(outcome, _Admission):
                placements.append(outcome.job)
            else:
                reasons[gang.job_id] = outcome

        waiting = []
        positions: dict[str, int] = {}
        explained: dict[tuple, str] = {}
        for gang, _ in ordered:
            if gang.job_id in reasons:
                positions[gang.vc] = positions.get(gang.vc, 0) + 1
                reason = self._explain(gang, reasons[gang.job_id], reservations, now, explained)
                waiting.append(WaitInfo(gang.job_id, reason, positions[gang.vc]))
        return CycleResult(
            placements=tuple(j.allocation(self.topology) for j in placements),
            preemptions=tuple(preemptions),
            waiting=tuple(waiting),
            rejected=tuple(rejected),
            expired=tuple(expired),
            reservations=self._reservation_infos(reservations),
        )

    def _reservation_infos(self, reservations: ReservationBook) -> tuple[ReservationInfo, ...]:
        if not reservations:
            return ()
        by_id = {node.cell.id: node for node in self.topology.nodes.values()}
        return tuple(self._reservation_info(r, by_id) for r in sorted(reservations, key=lambda r: r.job_id))

    def _reservation_info(self, r: Reservation, by_id: dict) -> ReservationInfo:
        pending = self.pending.get(r.job_id) if r.kind == PREEMPTION else None
        return ReservationInfo(
            job_id=r.job_id,
            kind=r.kind,
            nodes=r.nodes,
            devices=tuple(sorted(
                (by_id[node_id].name, by_id[node_id].host_devices(tuple(sorted(devices))))
                for node_id, devices in r.devices
            )),
            until=r.until,
            victims=r.victims,
            committed=pending is not None and pending.committed,
            vc=r.vc,
            leaf_cells=r.leaves,
        )

    def _new_job(self, gang: GangRequest, now: float) -> RunningJob:
        return RunningJob(
            job_id=gang.job_id,
            vc=gang.vc,
            user=gang.user,
            priority=gang.priority,
            opportunistic=gang.opportunistic,
            started_at=now,
            lazy_preemption=gang.lazy_preemption,
            max_runtime=gang.max_runtime,
            min_runtime=gang.min_runtime,
        )

    def _over_user_cap(self, gang: GangRequest, vc: VcState, needs: list[PodNeed]) -> str | None:
        cap = vc.spec.max_leaf_cells_per_user
        if cap is None:
            return None
        used = vc.user_leaves.get(gang.user, 0)
        total = sum(n.leaf_cells for n in needs)
        if used + total <= cap:
            return None
        return (
            f"user {gang.user!r} already uses {used} of the {cap} leaf cells allowed per user in VC "
            f"{vc.name!r}; the job needs {total} more"
        )

    def _held_back(
        self, gang: GangRequest, vc: VcState, needs: list[PodNeed], held: dict[str, int], holder: Reservation,
        now: float, taken: dict[str, int] | None = None,
    ) -> _HeldBack | None:
        """Why the gang may not take its VC's quota that starving gangs hold (``None``: it
        leaves them enough). What they hold must be free when the first of them expects
        to start, counting the VC's jobs that will still run then (those without a
        maximum runtime always do). ``taken``: what the gang took of its VC's own quota
        once placed (borrowing, it may bind some); otherwise what it asks."""
        at = min((r.until for r in self._holders(vc.name, gang, now)), key=lambda u: -1.0 if u is None else u)
        for sku in sorted(held):
            if taken is not None:
                need = taken.get(sku, 0)
            else:
                need = sum(n.leaf_cells for n in needs if n.sku == sku and n.pinned_cell is None)
            if need == 0:
                continue
            chain = self.topology.chains[sku]
            quota = vc.quota_leaves(chain)
            running = self._own_leaves_running_at(vc, chain, at, exclude=gang.job_id)
            if quota - vc.lent_leaves.get(sku, 0) - running - need >= held[sku]:
                continue
            return _HeldBack(
                f"blocked behind the reservation for job {holder.job_id} on {', '.join(holder.nodes)}, which holds "
                f"{held[sku]} of the {quota} {sku} of VC {vc.name!r} until {self._until(holder, now)}"
                f"{self._runtime_note(gang)}"
            )
        return None

    def _holders(self, vc: str, gang: GangRequest, now: float) -> list[Reservation]:
        return [
            r for r in self._cycle_reservations
            if r.kind == STARVATION and r.vc == vc and r.job_id != gang.job_id and not r.admits(gang, now)
        ]

    def _own_leaves_running_at(self, vc: VcState, chain: Chain, at: float | None, exclude: str) -> int:
        """Leaf cells of the VC's own quota in ``chain`` its jobs will still hold at
        ``at`` (``None``: all they hold now)."""
        key = (vc.name, chain.sku.name, at, exclude, self.ledger.version)
        found = self._running_at.get(key)
        if found is not None:
            return found
        total = 0
        for job in self.ledger.guaranteed_by_vc.get(vc.name, {}).values():
            if job.job_id == exclude or job.state == TERMINATING:
                continue
            ends = job.ends_at()
            if at is not None and ends is not None and ends <= at:
                continue
            total += sum(
                len(p.devices) for p in job.pods
                if p.binding is not None and not p.binding.pinned and not p.binding.borrowed and p.node.chain is chain
            )
        if len(self._running_at) > 256:
            self._running_at.clear()
        self._running_at[key] = total
        return total

    @staticmethod
    def _until(r: Reservation, now: float) -> str:
        return "its running jobs finish (they declared no maximum runtime)" if r.until is None else clock(r.until, now)

    @staticmethod
    def _runtime_note(gang: GangRequest) -> str:
        if gang.max_runtime is None:
            return "; this job declares no maximum runtime"
        return "; this job's maximum runtime would end later"

    def _admit_guaranteed(
        self,
        gang: GangRequest,
        options: list[GangOption],
        reservations: ReservationBook,
        now: float,
        borrowing: bool,
    ) -> _Admission | _Wait:
        """Place the gang, or plan a preemption for it, or say why it waits."""
        vc = self.vcs[gang.vc]
        if not reservations and vc.spec.max_leaf_cells_per_user is None and len(options) == 1:
            # The common case of a queue full of gangs alike: one dictionary look-up.
            hit = self._failures.get((gang.vc, gang.priority, options[0].shape, (), borrowing))
            if hit is not None and hit[0] == self.ledger.generation:
                return hit[1]
        lenders = [self.vcs[n] for n in self.requests.lenders[vc.name]] if borrowing else None
        # A borrowing gang takes over no preemption's reservation: it is decided after
        # every gang within its own quota (the borrow pass), whose preemptions of this
        # cycle stand, their victims perhaps told already.
        ids, blocked = reservations.blocked_for(gang, now, takeover=not borrowing)
        held, holder = reservations.quota_held(gang, now) if reservations else ({}, None)
        first_reason: _Wait | None = None
        for option in options:
            needs = option.needs
            reason: _Wait | None = self._over_user_cap(gang, vc, needs)
            if reason is None and holder is not None and not borrowing:
                # Its own quota only: what a starving gang holds is not there for it.
                reason = self._held_back(gang, vc, needs, held, holder, now)
            if reason is None:
                key = (gang.vc, gang.priority, option.shape, ids, borrowing)
                hit = self._failures.get(key)
                if hit is not None and hit[0] == self.ledger.generation:
                    reason = hit[1]
                else:
                    job = self._new_job(gang, now)
                    mark = self.topology.mark()
                    before = {sku: vc.own_used_leaves(sku) for sku in held}
                    shortage = self.placer.place_guaranteed(job, vc, needs, lenders, blocked)
                    if shortage is None and holder is not None and borrowing:
                        # Borrowing, it may still have bound some of its own quota.
                        taken = {sku: vc.own_used_leaves(sku) - before[sku] for sku in held}
                        reason = self._held_back(gang, vc, needs, held, holder, now, taken)
                        if reason is not None:
                            self.topology.rollback(mark)
                            first_reason = first_reason or reason
                            continue
                    if shortage is None:
                        self.ledger.register(job)
                        self.topology.commit()
                        return _Admission(job, ())
                    self.topology.rollback(mark)
                    preempting = self._preempt_for(gang, vc, needs, blocked, now, lenders, reservations)
                    if preempting is not None:
                        return preempting
                    reason = _Shortfall(gang, option, shortage, borrowing, ids, blocked)
                    self._failures[key] = (self.ledger.generation, reason)
            first_reason = first_reason or reason
        assert first_reason is not None
        return first_reason

    def _admit_opportunistic(
        self, gang: GangRequest, options: list[GangOption], reservations: ReservationBook, now: float
    ) -> _Admission | _Wait:
        if not reservations and len(options) == 1:
            hit = self._failures.get(("opportunistic", options[0].shape, ()))
            if hit is not None and hit[0] == self.ledger.generation:
                return hit[1]
        ids, blocked = reservations.blocked_for(gang, now)
        first_reason: _Wait | None = None
        for option in options:
            needs = option.needs
            key = ("opportunistic", option.shape, ids)
            hit = self._failures.get(key)
            if hit is not None and hit[0] == self.ledger.generation:
                reason = hit[1]
            else:
                job = self._new_job(gang, now)
                mark = self.topology.mark()
                shortage = self.placer.place_opportunistic(job, needs, blocked)
                if shortage is None:
                    self.ledger.register(job)
                    self.topology.commit()
                    return _Admission(job, ())
                self.topology.rollback(mark)
                reason = _Shortfall(gang, option, shortage, False, ids, blocked)
                self._failures[key] = (self.ledger.generation, reason)
            first_reason = first_reason or reason
        assert first_reason is not None
        return first_reason

    def _borrow_pass(
        self,
        borrowers: dict[str, list[tuple[GangRequest, list[GangOption]]]],
        reservations: ReservationBook,
        now: float,
        placements: list[RunningJob],
        preemptions: list[Preemption],
        reasons: dict[str, _Wait],
        gate: BudgetGate,
    ) -> None:
        """Offer idle cohort capacity to the VC with the lowest weighted dominant share of
        borrowed cells first, one gang at a time, so that no VC takes it all."""
        capacity: dict[str, dict[str, int]] = {}
        for cohort, members in self.requests.cohorts.items():
            per_sku: dict[str, int] = {}
            for name in members:
                for sku, chain in self.topology.chains.items():
                    per_sku[sku] = per_sku.get(sku, 0) + self.vcs[name].quota_leaves(chain)
            capacity[cohort] = per_sku

        def share(name: str) -> float:
            vc = self.vcs[name]
            return borrow_share(vc, capacity[vc.spec.cohort])

        position = {name: 0 for name in borrowers}
        heap = [(share(name), name) for name in sorted(borrowers)]
        heapq.heapify(heap)
        while heap:
            current, name = heapq.heappop(heap)
            if current != share(name):
                heapq.heappush(heap, (share(name), name))
                continue
            gang, options = borrowers[name][position[name]]
            position[name] += 1
            # Admissions earlier in the cycle may have used the VC's last GPU-hours.
            outcome = gate.refusal(gang, options[0].needs) or self._admit_guaranteed(
                gang, options, reservations, now, borrowing=True
            )
            if isinstance(outcome, _Admission):
                # Borrowing, it took over no reservation (see ``_admit_guaranteed``).
                gate.charge(gang, options[0].needs)
                placements.append(outcome.job)
                preemptions.extend(outcome.preemptions)
                del reasons[gang.job_id]
                reservations.keep(lambda r: r.job_id != gang.job_id)
            else:
                if isinstance(outcome, _Preempting):
                    gate.charge(gang, options[0].needs)
                    # Its starvation reservation, if any, gives way to the preemption's.
                    reservations.keep(lambda r: r.job_id != gang.job_id or r.kind == PREEMPTION)
                reasons[gang.job_id] = outcome
            if position[name] < len(borrowers[name]):
                heapq.heappush(heap, (share(name), name))

    # --- preemption ----------------------------------------------------------------

    def _preempt_for(
        self, gang: GangRequest, vc: VcState, needs: list[PodNeed], blocked: Blocked, now: float,
        lenders: list[VcState] | None, reservations: ReservationBook,
    ) -> _Preempting | None:
        """Plan a preemption that makes room for the gang, or return ``None``. Borrowing
        (``lenders``), a gang preempts only opportunistic jobs: it never reclaims from its
        own VC to borrow."""
        skus = sorted({n.sku for n in needs})
        pool_usable = lenders is not None
        for sku in skus:
            chain = self.topology.chains[sku]
            need = sum(n.leaf_cells for n in needs if n.sku == sku and n.pinned_cell is None)
            held = sum(v for p, v in vc.own_used_by_priority.get(sku, {}).items() if p >= gang.priority)
            room = vc.quota_leaves(chain) - held
            if lenders is not None:
                lendable = self._lendable_now(lenders, chain)
                if vc.spec.borrowing_limit is not None:
                    lendable = min(lendable, max(0, vc.spec.borrowing_limit - vc.total_borrowed()))
                room += lendable
            # Even with every preemptible job gone the VC could not hold the gang.
            if need > room:
                return None
            pool_usable = pool_usable or vc.has_unbound(sku)
        cohort = [n for n in self.requests.cohort_of(vc) if n != vc.name] if lenders is None else []
        # Gangs alike in a wave of preemptions see the same candidates: list them once
        # per state of the jobs.
        key = (self.ledger.version, vc.name, gang.priority, tuple(skus), pool_usable, now, tuple(cohort))
        everyone = self._candidates.get(key)
        if everyone is None:
            if len(self._candidates) > 64:
                self._candidates.clear()
            everyone = self._candidates[key] = candidates(
                self.ledger, vc.name, cohort, gang.priority, set(skus), pool_usable, now, set()
            )
        claimed = self._claimed(gang.priority if lenders is None else None)
        ordered = [j for j in everyone if j.job_id not in claimed]
        if lenders is not None:
            ordered = [j for j in ordered if j.opportunistic]
        if not ordered:
            return None

        def trial(victims: list[RunningJob], scopes, part: list[PodNeed]):
            mark = self.topology.mark()
            for victim in victims:
                self.ledger.remove(victim, keep_for=vc.name)
            job = self._new_job(gang, now)
            fits = self.placer.place_guaranteed(job, vc, part, lenders, blocked, scopes) is None
            used = frozenset((p.node.cell.id, d) for p in job.pods for d in p.devices) if fits else None
            self.topology.rollback(mark)
            return used

        def fresh(sku: str, k: int) -> int:
            chain = self.topology.chains[sku]
            owners = [vc] + (lenders or [])
            return sum(
                owner.unbound(sku, tid, line) * max(1, chain.leaves[tid] // max(k, 1))
                for owner in owners for tid, line in owner.quota_entries(sku) if chain.leaves[tid] >= k
            )

        bindings = [b for by_cell in vc.bindings.values() for b in by_cell.values()]
        # The VC's lent cells, whose borrowers this gang may preempt (not when borrowing).
        lent = [
            b for other in cohort for by_cell in self.vcs[other].bindings.values() for b in by_cell.values()
            if b.owner == vc.name
        ] if vc.lent_leaves and any(vc.lent_leaves.values()) else []
        choice = VictimSearch(self.topology, blocked, trial, vc.name, fresh, bindings, lent).choose(needs, ordered)
        if choice is None:
            return None
        mark = self.topology.mark()
        kept = [b for victim in choice.victims for b in self.ledger.remove(victim, keep_for=vc.name)]
        job = self._new_job(gang, now)
        placed = self.placer.place_guaranteed(job, vc, needs, lenders, blocked, choice.scopes) is None
        self.ledger.drop_unused(kept)
        pods = job.allocation(self.topology).pods
        self.topology.rollback(mark)
        assert placed, "the victim search's last trial placed the gang"
        pending = PendingPreemption(
            job_id=gang.job_id,
            vc=gang.vc,
            user=gang.user,
            priority=gang.priority,
            decided_at=now,
            victims=sorted(v.job_id for v in choice.victims),
            pods=pods,
            scopes=plan_scopes(self.topology, pods),
        )
        self.pending[gang.job_id] = pending
        reservations.append(pending.reservation(self.topology))
        return _Preempting(pending)

    def _advance(
        self, pending: PendingPreemption, gang: GangRequest, options: list[GangOption],
        reservations: ReservationBook, now: float,
    ) -> _Admission | _Wait:
        """A preempting gang's turn: placed once its victims are gone; a planned preemption
        gives way to room that appeared elsewhere, is committed if its victims still make
        room, and is decided again if they do not."""
        vc = self.vcs[gang.vc]
        skus = {self.topology.locate(p.node, p.devices)[0].chain.sku.name for p in pending.pods}
        option = next((o for o in options if {n.sku for n in o.needs} == skus), options[0])
        needs = option.needs
        lenders = [self.vcs[n] for n in self.requests.lenders[vc.name]] if pending.borrowing else None
        _, blocked = reservations.blocked_for(gang, now, takeover=lenders is None)
        job = pending.job
        if job is not None and all(v not in self.ledger.jobs for v in pending.victims):
            self.ledger.launch(job, now)
            self.topology.commit()
            self._drop_pending(pending, reservations, abandon=False)
            return _Admission(job, ())
        if job is not None:
            # Told to stop, the victims go anyway: the gang keeps to the cells it holds
            # (it must not take the quota they freed somewhere else).
            return _Preempting(pending)
        mark = self.topology.mark()
        elsewhere = self._new_job(gang, now)
        if self.placer.place_guaranteed(elsewhere, vc, needs, lenders, blocked) is None:
            # Room appeared without the preemption: its victims, not yet told, run on.
            self.ledger.register(elsewhere)
            self.topology.commit()
            self._drop_pending(pending, reservations, abandon=False)
            return _Admission(elsewhere, ())
        self.topology.rollback(mark)
        victims = [self.ledger.jobs[v] for v in pending.victims if v in self.ledger.jobs]
        if victims and all(v.state == RUNNING for v in victims):
            outcome = self._commit(pending, gang, vc, needs, lenders, blocked, victims, reservations, now)
            if outcome is not None:
                return outcome
        self._drop_pending(pending, reservations)
        return self._admit_guaranteed(gang, options, reservations, now, borrowing=lenders is not None)

    def _commit(
        self, pending: PendingPreemption, gang: GangRequest, vc: VcState, needs: list[PodNeed],
        lenders: list[VcState] | None, blocked: Blocked, victims: list[RunningJob], reservations: ReservationBook,
        now: float,
    ) -> _Admission | _Preempting | None:
        """Tell the victims to stop: lazily preempted ones are demoted if the gang fits
        beside them, the others keep their devices until released; the gang holds its
        quota and devices meanwhile (or runs at once if no victim has to go)."""
        victims = sorted(victims, key=lambda j: j.job_id)
        lazy = {j.job_id for j in victims if not j.opportunistic and j.lazy_preemption}
        mark = self.topology.mark()
        kept: list = []
        job: RunningJob | None = None
        if lazy:
            for victim in victims:
                if victim.job_id in lazy:
                    self.ledger.demote(victim)
                else:
                    kept += self.ledger.remove(victim, keep_for=vc.name)
            job = self._new_job(gang, now)
            # With only demoted victims the gang may go anywhere: it stops no one; stopped
            # victims must hold devices it uses, so it stays where it was planned (and a
            # placement that would leave one of them out is no placement for this plan).
            scopes = pending.scopes if len(lazy) < len(victims) else None
            stopped = [v for v in victims if v.job_id not in lazy]
            if not self._placed_over(job, vc, needs, lenders, blocked, scopes, stopped):
                self.topology.rollback(mark)
                job, kept = None, []
        if job is None:
            # No lazy victim, or their devices are needed after all: every victim stops,
            # its cells kept for the gang, as when the preemption was planned.
            lazy = set()
            for victim in victims:
                kept += self.ledger.remove(victim, keep_for=vc.name)
            job = self._new_job(gang, now)
            if not self._placed_over(job, vc, needs, lenders, blocked, pending.scopes, victims):
                self.topology.rollback(mark)
                return None
        self.ledger.drop_unused(kept)
        self.ledger.register(job)
        told = tuple(Preemption(v.job_id, v.job_id in lazy, gang.job_id) for v in victims)
        stopped = [v for v in victims if v.job_id not in lazy]
        if not stopped:
            self.topology.commit()
            self._drop_pending(pending, reservations, abandon=False)
            return _Admission(job, told)
        self.ledger.reserve(job)
        for victim in stopped:
            self.ledger.keep_devices(victim)
        self.topology.commit()
        pending.job = job
        pending.victims = [v.job_id for v in stopped]
        pending.pods = job.allocation(self.topology).pods
        reservations.keep(lambda r: r.job_id != gang.job_id)
        reservations.append(pending.reservation(self.topology))
        return _Preempting(pending, told)

    def _placed_over(
        self, job: RunningJob, vc: VcState, needs: list[PodNeed], lenders: list[VcState] | None, blocked: Blocked,
        scopes: dict | None, stopped: list[RunningJob],
    ) -> bool:
        """Place the gang; whether it fits using devices of every job in ``stopped``."""
        if self.placer.place_guaranteed(job, vc, needs, lenders, blocked, scopes) is not None:
            return False
        used = {(p.node.cell.id, d) for p in job.pods for d in p.devices}
        return all(any((p.node.cell.id, d) in used for p in v.pods for d in p.devices) for v in stopped)

    def _drop_pending(self, pending: PendingPreemption, reservations: ReservationBook, abandon: bool = True) -> None:
        if abandon:
            self._abandon(pending)
        else:
            del self.pending[pending.job_id]
        reservations.keep(lambda r: not (r.job_id == pending.job_id and r.kind == PREEMPTION))

    @staticmethod
    def _lendable_now(lenders: list[VcState], chain: Chain) -> int:
        """Unused leaf cells the lenders could lend right now, within their limits."""
        sku = chain.sku.name
        idle = 0
        for lender in lenders:
            room = sum(
                lender.unbound(sku, tid, line) * chain.leaves[tid] for tid, line in lender.quota_entries(sku)
            )
            if lender.spec.lending_limit is not None:
                room = min(room, max(0, lender.spec.lending_limit - lender.total_lent()))
            idle += room
        return idle

    # --- starvation ------------------------------------------------------------------

    def _reserve(
        self, gang: GangRequest, needs: list[PodNeed], reservations: ReservationBook, now: float
    ) -> Reservation | None:
        """Hold the devices the gang would take if the jobs it competes with were gone."""
        vc = self.vcs[gang.vc]
        _, blocked = reservations.blocked_for(gang, now, backfill=False)
        mark = self.topology.mark()
        competitors = [
            j
            for j in sorted(self.ledger.jobs.values(), key=lambda j: j.job_id)
            if j.state != PREEMPTING and (
                j.state == TERMINATING
                or j.opportunistic
                or (j.vc == gang.vc and j.priority <= gang.priority)
                or any(p.binding is not None and p.binding.borrowed and p.binding.owner == gang.vc for p in j.pods)
            )
        ]
        for job in competitors:
            self.ledger.remove(job)
        trial = self._new_job(gang, now)
        fits = self.placer.place_guaranteed(trial, vc, needs, None, blocked) is None
        devices = {pod.node.cell.id: frozenset(pod.devices) for pod in trial.pods}
        nodes = {pod.node.cell.id: pod.node for pod in trial.pods}
        self.topology.rollback(mark)
        if not fits:
            return None
        until: float | None = now
        for node_id in sorted(devices):
            node = nodes[node_id]
            for d in sorted(devices[node_id]):
                occupant = node.jobs[d]
                if occupant is None:
                    continue
                job = self.ledger.jobs[occupant]
                if job.state == TERMINATING:
                    ends: float | None = now  # already stopping
                else:
                    ends = job.started_at + job.min_runtime if job.opportunistic else job.ends_at()
                until = None if until is None or ends is None else max(until, ends)
        leaves: dict[str, int] = {}
        for need in needs:
            if need.pinned_cell is None:
                leaves[need.sku] = leaves.get(need.sku, 0) + need.leaf_cells
        for sku in sorted(leaves):
            until = self._quota_frees_at(vc, sku, leaves[sku], gang.priority, until)
        return Reservation(
            job_id=gang.job_id,
            devices=tuple(sorted(devices.items())),
            nodes=tuple(sorted(n.name for n in nodes.values())),
            until=until,
            vc=gang.vc,
            leaves=tuple(sorted(leaves.items())),
        )

    def _quota_frees_at(self, vc: VcState, sku: str, need: int, priority: int, until: float | None) -> float | None:
        """When the VC has ``need`` leaf cells of its own quota free, if its jobs of
        priority up to ``priority`` end at their maximum runtimes (those of higher
        priority stay): ``until`` or later; ``None`` if that depends on a job without one."""
        if until is None:
            return None
        chain = self.topology.chains[sku]
        free = vc.quota_leaves(chain) - vc.own_used_leaves(sku) - vc.lent_leaves.get(sku, 0)
        if free >= need:
            return until
        own = []
        for job in self.ledger.guaranteed_by_vc.get(vc.name, {}).values():
            if job.priority > priority or job.state != RUNNING:
                continue
            n = sum(
                len(p.devices) for p in job.pods
                if p.binding is not None and not p.binding.pinned and not p.binding.borrowed
                and p.node.chain is chain
            )
            if n:
                own.append((job.ends_at(), job.job_id, n))
        for ends, _, n in sorted(own, key=lambda e: (e[0] is None, e[0] or 0.0, e[1])):
            if ends is None:
                return None
            free += n
            until = max(until, ends)
            if free >= need:
                return until
        return until

    # --- reasons ---------------------------------------------------------------------

    def _explain(
        self, gang: GangRequest, wait: _Wait, reservations: ReservationBook, now: float, explained: dict[tuple, str]
    ) -> str:
        """The text of a wait reason, from the state at the end of the cycle; gangs alike
        share one text unless a reservation is in play (it depends on each gang)."""
        if isinstance(wait, str):
            return wait
        if isinstance(wait, _Preempting):
            return self._explain_preempting(wait.pending)
        # A reason may be shared by gangs alike (see ``_failures``): the text is the gang's own.
        key = None
        own = None
        if reservations and not gang.opportunistic:
            own = next((r for r in reservations if r.job_id == gang.job_id and r.kind == STARVATION), None)
        if own is None and not wait.reservation_ids:
            key = (gang.opportunistic, gang.vc, gang.priority, wait.option.shape, wait.borrowing)
            if key in explained:
                return explained[key]
        needs = wait.option.needs
        if gang.opportunistic:
            text = self._explain_opportunistic(gang, needs, wait.shortage, wait.blocked, reservations, now)
        else:
            vc = self.vcs[gang.vc]
            lenders = [self.vcs[n] for n in self.requests.lenders[vc.name]] if wait.borrowing else None
            text = self._explain_guaranteed(gang, vc, needs, wait.shortage, lenders, wait.blocked, reservations, now)
            if own is not None:
                quota = ", ".join(f"{n} {sku}" for sku, n in own.leaves)
                text = (
                    f"holds a reservation (devices on {', '.join(own.nodes)} and {quota} of VC {vc.name!r}'s quota) "
                    f"until {self._until(own, now)}, as it waited longer than the VC's starvation threshold; {text}"
                )
        if key is not None:
            explained[key] = text
        return text

    def _explain_preempting(self, pending: PendingPreemption) -> str:
        victims = ", ".join(pending.victims)
        plural = "s" if len(pending.victims) > 1 else ""
        nodes = ", ".join(sorted({p.node for p in pending.pods}))
        if pending.committed:
            return (
                f"preempting: holds its cells on {nodes} and starts once the pods of the preempted job{plural} "
                f"{victims} are gone"
            )
        return (
            f"preempting job{plural} {victims} to run on {nodes}: they are told to stop at the next cycle "
            "if that still makes room"
        )

    def _reservation_in_the_way(
        self, gang: GangRequest, needs: list[PodNeed], lenders: list[VcState] | None, blocked: Blocked,
        reservations: ReservationBook, now: float,
    ) -> str | None:
        if not blocked:
            return None
        mark = self.topology.mark()
        trial = self._new_job(gang, now)
        if gang.opportunistic:
            fits = self.placer.place_opportunistic(trial, needs, NO_BLOCK) is None
        else:
            fits = self.placer.place_guaranteed(trial, self.vcs[gang.vc], needs, lenders, NO_BLOCK) is None
        used = {(pod.node.cell.id, d) for pod in trial.pods for d in pod.devices}
        self.topology.rollback(mark)
        if not fits:
            return None
        for r in reservations:
            if r.job_id == gang.job_id or (r.admits(gang, now) and (lenders is None or r.kind != PREEMPTION)):
                continue
            if any((node_id, d) in used for node_id, devices in r.devices for d in devices):
                if r.kind == PREEMPTION:
                    return f"blocked behind job {r.job_id}, which is preempting on {', '.join(r.nodes)}"
                return (
                    f"blocked behind the reservation for job {r.job_id} on {', '.join(r.nodes)} until "
                    f"{self._until(r, now)}{self._runtime_note(gang)}"
                )
        return None

    def _bad_nodes(self, chain: Chain, vc: str | None) -> list[str]:
        names = []
        for node in self.topology.unhealthy.values():
            if node.chain is not chain or (
                node.pinned and any(c.binding is not None and c.binding.pinned for c in node.cell.up)
            ):
                continue  # wholly inside a pinned cell
            users = {c.binding.user for c in node.cell.up if c.binding is not None}
            if vc is None or not users or vc in users:
                names.append(node.name)
        return sorted(names)

    def _explain_guaranteed(
        self,
        gang: GangRequest,
        vc: VcState,
        needs: list[PodNeed],
        shortage: Shortage,
        lenders: list[VcState] | None,
        blocked: Blocked,
        reservations: ReservationBook,
        now: float,
    ) -> str:
        behind = self._reservation_in_the_way(gang, needs, lenders, blocked, reservations, now)
        if behind is not None:
            return behind
        chain = self.topology.chains[shortage.sku]
        sku = shortage.sku
        if shortage.pinned_cell is not None:
            cell = vc.pinned[shortage.pinned_cell].cell
            pinned_needs = [n for n in needs if n.pinned_cell == shortage.pinned_cell]
            return (
                f"pinned cell {shortage.pinned_cell!r} of VC {vc.name!r} has {cell.idle} of {cell.leaves} {sku} "
                f"free; the job needs {describe_pods(pinned_needs, chain)}"
                + bad_nodes_note([n.name for n in cell.nodes if not n.healthy])
            )
        chain_needs = [n for n in needs if n.sku == sku and n.pinned_cell is None]
        need = sum(n.leaf_cells for n in chain_needs)
        quota = vc.quota_leaves(chain)
        lent = vc.lent_leaves.get(sku, 0)
        free = quota - vc.own_used_leaves(sku) - lent
        text = f"VC {vc.name!r} has {free} of {quota} {sku} free; the job needs {describe_pods(chain_needs, chain)}"
        held = sum(v for p, v in vc.own_used_by_priority.get(sku, {}).items() if p >= gang.priority)
        if free >= need:
            text += (
                f"; they are split: at most {self._largest_usable_block(vc, chain)} idle {sku} "
                "on one healthy node in cells the VC can use"
            )
        elif held:
            text += f"; {held} {sku} are used by its jobs of equal or higher priority"
        if lent:
            text += f"; {lent} {sku} are lent to other VCs of cohort {vc.spec.cohort!r}"
        text += bad_nodes_note(self._bad_nodes(chain, vc.name))
        protected = [
            j for j in self.ledger.graced.values()
            if (j.opportunistic or (j.vc == vc.name and j.priority < gang.priority))
            and now - j.started_at < j.min_runtime and any(p.node.chain is chain for p in j.pods)
        ]
        if protected:
            first = min(j.started_at + j.min_runtime for j in protected)
            text += (
                f"; {len(protected)} job{'s' if len(protected) > 1 else ''} it could preempt "
                f"{'are' if len(protected) > 1 else 'is'} within the minimum runtime until {clock(first, now)}"
            )
        if lenders is not None:
            limit = vc.spec.borrowing_limit
            borrowed = vc.total_borrowed()
            if limit is not None:
                text += f"; it borrows {borrowed} of at most {limit} leaf cells"
            text += f"; cohort {vc.spec.cohort!r} has {self._lendable_now(lenders, chain)} unused {sku} it could lend"
        return text

    def _largest_usable_block(self, vc: VcState, chain: Chain) -> int:
        """The most idle devices on one healthy node that the VC's cells (bound, or
        free cells it could still bind) offer."""
        best = 0
        for binding in vc.bindings.get(chain.sku.name, {}).values():
            if binding.pinned:
                continue
            cell = binding.cell
            for node in (cell.node,) if cell.node is not None else cell.nodes:
                if node.healthy:
                    best = max(best, cell.idle if cell.node is not None else node.free)
        if vc.has_unbound(chain.sku.name):
            best = max(best, self.placer.largest_free_cell_block(chain))
        return best

    def _explain_opportunistic(
        self, gang: GangRequest, needs: list[PodNeed], shortage: Shortage, blocked: Blocked,
        reservations: ReservationBook, now: float,
    ) -> str:
        behind = self._reservation_in_the_way(gang, needs, None, blocked, reservations, now)
        if behind is not None:
            return behind
        chain = self.topology.chains[shortage.sku]
        chain_needs = [n for n in needs if n.sku == shortage.sku]
        largest = self.placer.largest_idle_block(chain)
        return (
            f"no idle {shortage.sku} for an opportunistic job: it needs {describe_pods(chain_needs, chain)}; "
            f"the most idle {shortage.sku} on one healthy node is {largest}"
            + bad_nodes_note(self._bad_nodes(chain, None))
        )

    # --- restore -----------------------------------------------------------------------

    def restore(self, allocations: Sequence[Allocation]) -> RestoreReport:
        """Replace the running state with persisted placements (see :mod:`.restore`)."""
        with collector_paused():
            return Restorer(self.topology, self.ledger, self.vcs, self.requests.lenders).restore(
                allocations, self.pending
            )

    # --- introspection ----------------------------------------------------------------

    def allocations(self) -> tuple[Allocation, ...]:
        """Every job's placement, by job id: what the database stores. Besides running
        jobs: preempted jobs whose pods are being deleted (``state="terminating"``) and
        preempting gangs (``state="preempting"``, with the ``victims`` they wait for,
        ``planned`` while those are not yet told to stop), whose pods must not be created."""
        ids = set(self.ledger.jobs) | set(self.pending)
        return tuple(self.allocation(j) for j in sorted(ids))

    def allocation(self, job_id: str) -> Allocation | None:
        """One job's entry of :meth:`allocations` (``None`` if the engine holds nothing for it)."""
        pending = self.pending.get(job_id)
        job = self.ledger.jobs.get(job_id)
        if pending is not None and job is None:
            return Allocation(
                job_id=job_id, vc=pending.vc, user=pending.user, priority=pending.priority, opportunistic=False,
                lazy_preempted=False, started_at=pending.decided_at, pods=pending.pods, state=PREEMPTING,
                victims=tuple(pending.victims), planned=True,
            )
        if job is None:
            return None
        alloc = job.allocation(self.topology)
        return replace(alloc, victims=tuple(pending.victims)) if pending is not None else alloc

    def state_of(self, job_id: str) -> str | None:
        """"running", "preempting", "terminating" or ``None`` (the engine holds nothing for it)."""
        if job_id in self.pending:
            return PREEMPTING
        job = self.ledger.jobs.get(job_id)
        return None if job is None else job.state

    def node_status(self, node: str) -> NodeStatus:
        """The node's health and which job (and whether opportunistic) uses each device."""
        return node_status(self.topology, node)

    def vc_status(self, vc: str) -> VcStatus:
        """The VC's cells by type: guaranteed, used, free, bad, borrowed, lent."""
        return vc_status(self.topology, self.ledger, self.vcs, self._sku_order, vc)
