"""The engine: the one object the control plane talks to."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

from .cells import Binding, Cell, Chain, Topology
from .decisions import (
    Allocation,
    CellTypeStatus,
    CycleResult,
    DeviceUse,
    NodeStatus,
    Preemption,
    Rejection,
    RestoreIssue,
    RestoreReport,
    VcStatus,
    WaitInfo,
)
from .errors import InvalidRequestError
from .ledger import Ledger, RunningJob, RunningPod
from .placement import NO_BLOCK, Blocked, Placer, PodNeed, Shortage
from .preemption import candidates, choose_victims
from .queue import (
    Reservation,
    bad_nodes_note,
    blocked_for,
    borrow_share,
    clock,
    cycle_order,
    describe_pods,
)
from .quota import VcState, check_safety, resolve_quotas
from .spec import MAX_PRIORITY, ClusterSpec, GangRequest, VirtualClusterSpec, leaf_cells_for

DEFAULT_STARVATION_THRESHOLD = 3600.0


@dataclass(frozen=True)
class _Option:
    """One way to run a gang (one SKU choice): its pods' needs, and its shape, which is
    all that decides whether it fits and so keys the cycle's failure cache."""

    needs: list[PodNeed]
    shape: tuple


@dataclass
class _Admission:
    job: RunningJob
    preemptions: tuple[Preemption, ...]


class Engine:
    """Gang scheduling over HiveD-style cells.

    ``schedule`` decides in one call: placements, preemptions and wait reasons. A
    preemptor is placed in the same cycle as its preemption: the engine releases killed
    victims (and demotes lazily preempted ones) itself, so the caller must delete the
    victims' pods before it creates the preemptor's. A lazy victim is demoted only if the
    preemptor is placed; when the preemptor's placement fails nothing changes.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        vcs: Sequence[VirtualClusterSpec],
        *,
        starvation_threshold: float = DEFAULT_STARVATION_THRESHOLD,
    ) -> None:
        self.cluster = cluster
        self.topology = Topology(cluster)
        self.vcs: dict[str, VcState] = resolve_quotas(self.topology, vcs)
        check_safety(self.topology, self.vcs)
        self.ledger = Ledger(self.topology, self.vcs)
        self.placer = Placer(self.topology, self.ledger)
        self.starvation_threshold = starvation_threshold
        self._sku_order = [s.name for s in cluster.skus]
        self._cohorts: dict[str, list[str]] = {}
        for name in sorted(self.vcs):
            cohort = self.vcs[name].spec.cohort
            if cohort is not None:
                self._cohorts.setdefault(cohort, []).append(name)
        self._lenders: dict[str, list[str]] = {}
        self._usable_skus: dict[str, list[str]] = {}
        for name, state in self.vcs.items():
            cohort = state.spec.cohort
            lenders = []
            if cohort is not None and state.spec.borrowing_limit != 0:
                lenders = [n for n in self._cohorts[cohort] if n != name and self.vcs[n].spec.lending_limit != 0]
            self._lenders[name] = lenders
            self._usable_skus[name] = sorted(set(state.skus()).union(*(self.vcs[n].skus() for n in lenders)))
        # Per VC and SKU: the largest cell it can use and the leaves it may borrow at most.
        self._largest: dict[str, dict[str, int]] = {}
        self._borrowable: dict[str, dict[str, int]] = {}
        for name, state in self.vcs.items():
            lenders = [self.vcs[n] for n in self._lenders[name]]
            self._largest[name] = {}
            self._borrowable[name] = {}
            for sku, chain in self.topology.chains.items():
                self._largest[name][sku] = max([state.largest_cell_leaves(chain)] + [
                    lender.largest_cell_leaves(chain) for lender in lenders])
                lendable = sum(self._lendable(lender, chain) for lender in lenders)
                if state.spec.borrowing_limit is not None:
                    lendable = min(lendable, state.spec.borrowing_limit)
                self._borrowable[name][sku] = lendable
        self._failures: dict[tuple, tuple[int, str]] = {}
        # Resolved requests by job id; a queue is mostly the same gangs cycle after cycle.
        self._resolved: dict[str, tuple[GangRequest, list[_Option] | InvalidRequestError]] = {}

    # --- cluster events --------------------------------------------------------------

    def set_node_health(self, node: str, healthy: bool) -> None:
        """Bad nodes get no new pods; pods already there keep their placement."""
        try:
            target = self.topology.nodes[node]
        except KeyError:
            raise ValueError(f"unknown node {node!r}") from None
        self.topology.set_health(target, healthy)
        if healthy:
            self.ledger.generation += 1

    def release(self, job_id: str) -> None:
        """Free a finished or deleted job's cells; unknown ids are ignored (idempotent)."""
        job = self.ledger.jobs.get(job_id)
        if job is not None:
            self.ledger.remove(job)
            self.topology.commit()

    # --- requests --------------------------------------------------------------------

    def check_request(self, gang: GangRequest) -> None:
        """Raise :class:`InvalidRequestError` if no state of the cluster could run it."""
        self._resolve(gang)

    def _options(self, gang: GangRequest) -> list[_Option]:
        cached = self._resolved.get(gang.job_id)
        if cached is None or not (cached[0] is gang or cached[0] == gang):
            try:
                result: list[_Option] | InvalidRequestError = [
                    _Option(needs, tuple(sorted((n.sku, n.leaf_cells, n.pinned_cell or "") for n in needs)))
                    for needs in self._resolve(gang)
                ]
            except InvalidRequestError as e:
                result = e
            cached = self._resolved[gang.job_id] = (gang, result)
        if isinstance(cached[1], InvalidRequestError):
            raise cached[1]
        return cached[1]

    def _resolve(self, gang: GangRequest) -> list[list[PodNeed]]:
        """The SKU choices a gang can run with (one unless it leaves the SKU open)."""
        vc = self.vcs.get(gang.vc)
        if vc is None:
            raise InvalidRequestError("virtualCluster", f"unknown VC {gang.vc!r}; known: {', '.join(sorted(self.vcs))}")
        if gang.priority != -1 and not 0 <= gang.priority <= MAX_PRIORITY:
            raise InvalidRequestError(
                "jobPriorityClass", f"priority {gang.priority} is out of range: use -1 (oppo) or 0..{MAX_PRIORITY}"
            )
        if not gang.pods:
            raise InvalidRequestError("taskRoles", "the job has no pods")
        roles: dict[str, list] = {}
        for pod in gang.pods:
            roles.setdefault(pod.task_role, []).append(pod)
        vc_skus = self._usable_skus[vc.name]
        open_options: list[str | None] = [None]
        for role in sorted(roles):
            pods = roles[role]
            indices = sorted(p.index for p in pods)
            if indices != list(range(len(pods))):
                raise InvalidRequestError(
                    f"taskRoles.{role}.taskNumber", f"pod indices must be 0..{len(pods) - 1}, got {indices}"
                )
            shapes = sorted({(p.sku or "", p.leaf_cells, p.gpu, p.cpu, p.memory_mb, p.pinned_cell or "") for p in pods})
            if len(shapes) > 1:
                raise InvalidRequestError(
                    f"taskRoles.{role}.resourcePerInstance",
                    f"pods of one task role must ask for the same resources, got {len(shapes)} different requests",
                )
            pod = pods[0]
            field = f"taskRoles.{role}"
            if pod.pinned_cell is not None:
                if pod.pinned_cell not in vc.pinned:
                    known = ", ".join(sorted(vc.pinned)) or "none"
                    raise InvalidRequestError(
                        f"{field}.pinnedCellId",
                        f"VC {gang.vc!r} has no pinned cell {pod.pinned_cell!r} (its pinned cells: {known})",
                    )
                if gang.opportunistic:
                    raise InvalidRequestError(f"{field}.pinnedCellId", "opportunistic jobs cannot use pinned cells")
            if pod.sku is not None:
                if pod.sku not in self.topology.chains:
                    raise InvalidRequestError(f"{field}.skuType", f"unknown SKU {pod.sku!r}")
                if pod.sku not in vc_skus:
                    have = ", ".join(vc_skus) or "none"
                    raise InvalidRequestError(
                        f"{field}.skuType", f"VC {gang.vc!r} has no {pod.sku} cells (it has: {have})"
                    )
            elif pod.pinned_cell is None:
                wants_gpu = pod.gpu > 0
                fitting = [
                    s for s in self._sku_order if s in vc_skus and (self.topology.chains[s].sku.gpu > 0) == wants_gpu
                ]
                if not fitting:
                    kind = "GPU" if wants_gpu else "CPU"
                    raise InvalidRequestError(
                        f"{field}.skuType", f"VC {gang.vc!r} has no {kind} SKU that can serve task role {role!r}"
                    )
                if open_options != [None] and open_options != fitting:
                    raise InvalidRequestError(
                        f"{field}.skuType", "task roles without a SKU must all be GPU or all CPU-only"
                    )
                open_options = fitting
        options = []
        for choice in open_options:
            needs = []
            for role in sorted(roles):
                for pod in sorted(roles[role], key=lambda p: p.index):
                    sku = pod.sku
                    if sku is None:
                        sku = (
                            self.topology.pinned[pod.pinned_cell].chain.sku.name
                            if pod.pinned_cell is not None
                            else choice
                        )
                    leaves = pod.leaf_cells
                    if pod.sku is None and (pod.gpu or pod.cpu or pod.memory_mb):
                        leaves = leaf_cells_for(self.topology.chains[sku].sku, pod.gpu, pod.cpu, pod.memory_mb)
                    needs.append(PodNeed(role, pod.index, sku, leaves, pod.pinned_cell))
            options.append(needs)
        errors = []
        valid = []
        for needs in options:
            try:
                self._check_capacity(gang, vc, needs)
                valid.append(needs)
            except InvalidRequestError as e:
                errors.append(e)
        if not valid:
            raise errors[0]
        return valid

    def _check_capacity(self, gang: GangRequest, vc: VcState, needs: list[PodNeed]) -> None:
        totals: dict[str, int] = {}
        for need in needs:
            chain = self.topology.chains[need.sku]
            field = f"taskRoles.{need.task_role}.resourcePerInstance"
            if need.leaf_cells < 1:
                raise InvalidRequestError(field, f"a pod needs at least 1 leaf cell, asked for {need.leaf_cells}")
            if need.leaf_cells > chain.node_size:
                raise InvalidRequestError(
                    field, f"a pod needs {need.leaf_cells} {need.sku} on one node but {need.sku} nodes have {chain.node_size}"
                )
            if need.pinned_cell is not None:
                cell = self.topology.pinned[need.pinned_cell]
                if cell.chain is not chain:
                    raise InvalidRequestError(
                        f"taskRoles.{need.task_role}.pinnedCellId",
                        f"pinned cell {need.pinned_cell!r} holds {cell.chain.sku.name}, not {need.sku}",
                    )
                continue
            if gang.opportunistic:
                continue
            largest = self._largest[vc.name][need.sku]
            if need.leaf_cells > largest:
                raise InvalidRequestError(
                    field,
                    f"a pod needs {need.leaf_cells} {need.sku} in one cell but the largest {need.sku} cell VC "
                    f"{vc.name!r} can use holds {largest}",
                )
            totals[need.sku] = totals.get(need.sku, 0) + need.leaf_cells
        for sku, total in sorted(totals.items()):
            chain = self.topology.chains[sku]
            own = vc.quota_leaves(chain)
            lendable = self._borrowable[vc.name][sku]
            if total > own + lendable:
                extra = f" plus {lendable} it may borrow" if lendable else ""
                raise InvalidRequestError(
                    "taskRoles",
                    f"the job needs {total} {sku} but VC {vc.name!r} can never hold more than {own}{extra}",
                )

    def _lender_names(self, vc: VcState) -> list[str]:
        return self._lenders[vc.name]

    def _lendable(self, lender: VcState, chain: Chain) -> int:
        total = lender.quota_leaves(chain)
        limit = lender.spec.lending_limit
        return total if limit is None else min(total, limit)

    # --- the cycle ---------------------------------------------------------------------

    def schedule(self, queue: Sequence[GangRequest], now: float) -> CycleResult:
        """One scheduling cycle over every waiting gang.

        Order: guaranteed gangs by priority then submission time, within their VC's own
        quota (preempting when allowed); then gangs that may borrow, VC by VC in order of
        weighted dominant borrowed share; then opportunistic gangs. A gang that does not
        fit never blocks the ones behind it, except through a starvation reservation.
        """
        self._failures = {}
        expired = []
        for job_id in sorted(self.ledger.limited):
            job = self.ledger.limited[job_id]
            ends = job.ends_at()
            if ends is not None and now >= ends:
                self.ledger.remove(job)
                expired.append(job_id)
        self.topology.commit()

        rejected: list[Rejection] = []
        ordered: list[tuple[GangRequest, list[_Option]]] = []
        seen: set[str] = set()
        for gang in sorted(queue, key=cycle_order):
            if gang.job_id in self.ledger.jobs or gang.job_id in seen:
                rejected.append(Rejection(gang.job_id, "jobId", "the job is already running or queued twice"))
                continue
            seen.add(gang.job_id)
            try:
                ordered.append((gang, self._options(gang)))
            except InvalidRequestError as e:
                rejected.append(Rejection(gang.job_id, e.field, e.message))
        self._resolved = {job_id: self._resolved[job_id] for job_id in sorted(seen) if job_id in self._resolved}

        placements: list[RunningJob] = []
        preemptions: list[Preemption] = []
        reasons: dict[str, str] = {}
        reservations: list[Reservation] = []
        borrowers: dict[str, list[tuple[GangRequest, list[_Option]]]] = {}

        for gang, options in ordered:
            if gang.opportunistic:
                continue
            outcome = self._admit_guaranteed(gang, options, reservations, now, borrowing=False)
            if isinstance(outcome, _Admission):
                placements.append(outcome.job)
                preemptions.extend(outcome.preemptions)
                continue
            reasons[gang.job_id] = outcome
            vc = self.vcs[gang.vc]
            if self._lender_names(vc):
                borrowers.setdefault(gang.vc, []).append((gang, options))
            needs = options[0].needs
            if now - gang.submitted_at >= self.starvation_threshold and not self._over_user_cap(gang, vc, needs):
                reservation = self._reserve(gang, needs, reservations, now)
                if reservation is not None:
                    reservations.append(reservation)

        self._borrow_pass(borrowers, reservations, now, placements, preemptions, reasons)

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
        for gang, _ in ordered:
            if gang.job_id in reasons:
                positions[gang.vc] = positions.get(gang.vc, 0) + 1
                waiting.append(WaitInfo(gang.job_id, reasons[gang.job_id], positions[gang.vc]))
        return CycleResult(
            placements=tuple(j.allocation(self.topology) for j in placements),
            preemptions=tuple(preemptions),
            waiting=tuple(waiting),
            rejected=tuple(rejected),
            expired=tuple(expired),
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

    def _admit_guaranteed(
        self,
        gang: GangRequest,
        options: list[_Option],
        reservations: list[Reservation],
        now: float,
        borrowing: bool,
    ) -> _Admission | str:
        vc = self.vcs[gang.vc]
        if not reservations and vc.spec.max_leaf_cells_per_user is None and len(options) == 1:
            # The common case of a queue full of gangs alike: one dictionary look-up.
            hit = self._failures.get((gang.vc, gang.priority, options[0].shape, (), borrowing))
            if hit is not None and hit[0] == self.ledger.generation:
                return hit[1]
        lenders = [self.vcs[n] for n in self._lender_names(vc)] if borrowing else None
        ids, blocked = blocked_for(gang, reservations, now)
        first_reason = None
        for option in options:
            needs = option.needs
            reason = self._over_user_cap(gang, vc, needs)
            if reason is None:
                key = (gang.vc, gang.priority, option.shape, ids, borrowing)
                hit = self._failures.get(key)
                if hit is not None and hit[0] == self.ledger.generation:
                    reason = hit[1]
                else:
                    job = self._new_job(gang, now)
                    mark = self.topology.mark()
                    shortage = self.placer.place_guaranteed(job, vc, needs, lenders, blocked)
                    if shortage is None:
                        self.ledger.register(job)
                        self.topology.commit()
                        return _Admission(job, ())
                    self.topology.rollback(mark)
                    admission = self._preempt_for(gang, vc, needs, blocked, now, lenders)
                    if admission is not None:
                        return admission
                    reason = self._explain_guaranteed(gang, vc, needs, shortage, lenders, blocked, reservations, now)
                    self._failures[key] = (self.ledger.generation, reason)
            first_reason = first_reason or reason
        assert first_reason is not None
        return first_reason

    def _admit_opportunistic(
        self, gang: GangRequest, options: list[_Option], reservations: list[Reservation], now: float
    ) -> _Admission | str:
        if not reservations and len(options) == 1:
            hit = self._failures.get(("opportunistic", options[0].shape, ()))
            if hit is not None and hit[0] == self.ledger.generation:
                return hit[1]
        ids, blocked = blocked_for(gang, reservations, now)
        first_reason = None
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
                reason = self._explain_opportunistic(gang, needs, shortage, blocked, reservations, now)
                self._failures[key] = (self.ledger.generation, reason)
            first_reason = first_reason or reason
        assert first_reason is not None
        return first_reason

    def _borrow_pass(
        self,
        borrowers: dict[str, list[tuple[GangRequest, list[_Option]]]],
        reservations: list[Reservation],
        now: float,
        placements: list[RunningJob],
        preemptions: list[Preemption],
        reasons: dict[str, str],
    ) -> None:
        """Offer idle cohort capacity to the VC with the lowest weighted dominant share of
        borrowed cells first, one gang at a time, so that no VC takes it all."""
        capacity: dict[str, dict[str, int]] = {}
        for cohort, members in self._cohorts.items():
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
            outcome = self._admit_guaranteed(gang, options, reservations, now, borrowing=True)
            if isinstance(outcome, _Admission):
                placements.append(outcome.job)
                preemptions.extend(outcome.preemptions)
                del reasons[gang.job_id]
                reservations[:] = [r for r in reservations if r.job_id != gang.job_id]
            else:
                reasons[gang.job_id] = outcome
            if position[name] < len(borrowers[name]):
                heapq.heappush(heap, (share(name), name))

    # --- preemption ----------------------------------------------------------------

    def _preempt_for(
        self, gang: GangRequest, vc: VcState, needs: list[PodNeed], blocked: Blocked, now: float,
        lenders: list[VcState] | None,
    ) -> _Admission | None:
        """Place the gang by preempting, or return ``None``. Borrowing (``lenders``), a gang
        preempts only opportunistic jobs: it never reclaims from its own VC to borrow."""
        skus = sorted({n.sku for n in needs})
        pool_usable = lenders is not None
        for sku in skus:
            chain = self.topology.chains[sku]
            need = sum(n.leaf_cells for n in needs if n.sku == sku and n.pinned_cell is None)
            held = sum(v for p, v in vc.own_used_by_priority.get(sku, {}).items() if p >= gang.priority)
            room = vc.quota_leaves(chain) - held
            if lenders is not None:
                room += self._borrowable[vc.name][sku]
            # Even with every preemptible job gone the VC could not hold the gang.
            if need > room:
                return None
            pool_usable = pool_usable or any(vc.unbound(sku, tid) > 0 for tid in vc.quota_types(sku))
        cohort = [n for n in self._cohorts.get(vc.spec.cohort or "", []) if n != vc.name] if lenders is None else []
        ordered = candidates(self.ledger, vc.name, cohort, gang.priority, set(skus), pool_usable, now)
        if lenders is not None:
            ordered = [j for j in ordered if j.opportunistic]

        def fits(victims: list[RunningJob]) -> bool:
            mark = self.topology.mark()
            for victim in victims:
                self.ledger.remove(victim)
            ok = self.placer.place_guaranteed(self._new_job(gang, now), vc, needs, lenders, blocked) is None
            self.topology.rollback(mark)
            return ok

        victims = choose_victims(ordered, fits)
        if victims is None:
            return None
        victims.sort(key=lambda j: j.job_id)
        lazy = {j.job_id for j in victims if not j.opportunistic and j.lazy_preemption}
        mark = self.topology.mark()
        for victim in victims:
            if victim.job_id in lazy:
                self.ledger.demote(victim)
            else:
                self.ledger.remove(victim)
        job = self._new_job(gang, now)
        inner = self.topology.mark()
        if self.placer.place_guaranteed(job, vc, needs, lenders, blocked) is not None:
            # The demoted victims' devices are needed after all: kill them too.
            self.topology.rollback(inner)
            for victim in victims:
                if victim.job_id in lazy:
                    self.ledger.remove(victim)
            lazy = set()
            job = self._new_job(gang, now)
            if self.placer.place_guaranteed(job, vc, needs, lenders, blocked) is not None:
                self.topology.rollback(mark)
                return None
        self.ledger.register(job)
        self.topology.commit()
        return _Admission(job, tuple(Preemption(v.job_id, v.job_id in lazy, gang.job_id) for v in victims))

    # --- starvation ------------------------------------------------------------------

    def _reserve(
        self, gang: GangRequest, needs: list[PodNeed], reservations: list[Reservation], now: float
    ) -> Reservation | None:
        """Hold the devices the gang would take if the jobs it competes with were gone."""
        vc = self.vcs[gang.vc]
        _, blocked = blocked_for(gang, reservations, float("-inf"))
        mark = self.topology.mark()
        competitors = [
            j
            for j in sorted(self.ledger.jobs.values(), key=lambda j: j.job_id)
            if j.opportunistic
            or (j.vc == gang.vc and j.priority <= gang.priority)
            or any(p.binding is not None and p.binding.borrowed and p.binding.owner == gang.vc for p in j.pods)
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
                ends = job.started_at + job.min_runtime if job.opportunistic else job.ends_at()
                until = None if until is None or ends is None else max(until, ends)
        return Reservation(
            job_id=gang.job_id,
            devices=tuple(sorted(devices.items())),
            nodes=tuple(sorted(n.name for n in nodes.values())),
            until=until,
        )

    # --- reasons ---------------------------------------------------------------------

    def _reservation_in_the_way(
        self, gang: GangRequest, needs: list[PodNeed], lenders: list[VcState] | None, blocked: Blocked,
        reservations: list[Reservation], now: float,
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
            if r.job_id == gang.job_id or r.admits(gang, now):
                continue
            if any((node_id, d) in used for node_id, devices in r.devices for d in devices):
                until = "its running jobs finish (they declared no maximum runtime)" if r.until is None else clock(r.until, now)
                runtime = (
                    "; this job declares no maximum runtime" if gang.max_runtime is None
                    else "; this job's maximum runtime would end later"
                )
                return f"blocked behind the reservation for job {r.job_id} on {', '.join(r.nodes)} until {until}{runtime}"
        return None

    def _bad_nodes(self, chain: Chain, vc: str | None) -> list[str]:
        names = []
        for node in self.topology.unhealthy.values():
            if node.chain is not chain or node.pinned:
                continue
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
        reservations: list[Reservation],
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
            text += f"; the free {sku} are not in cells that can hold the pods"
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
            idle = 0
            for lender in lenders:
                room = sum(lender.unbound(sku, tid) * chain.leaves[tid] for tid in lender.quota_types(sku))
                if lender.spec.lending_limit is not None:
                    room = min(room, max(0, lender.spec.lending_limit - lender.total_lent()))
                idle += room
            text += f"; cohort {vc.spec.cohort!r} has {idle} unused {sku} it could lend"
        return text

    def _explain_opportunistic(
        self, gang: GangRequest, needs: list[PodNeed], shortage: Shortage, blocked: Blocked,
        reservations: list[Reservation], now: float,
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
        """Replace the running state with persisted placements.

        Guaranteed placements rebind their VC's virtual cells exactly as recorded
        (``PodPlacement.vc_cell``/``lent_by``; without them, the smallest fitting cell of
        the VC's quota). One that no longer fits the configuration (quota gone, cell taken,
        safety) runs on as opportunistic and is listed as demoted; one on missing nodes or
        devices, or colliding with another, is listed as dropped.
        """
        for job_id in sorted(self.ledger.jobs):
            self.ledger.remove(self.ledger.jobs[job_id])
        self.topology.commit()
        demoted: list[RestoreIssue] = []
        dropped: list[RestoreIssue] = []
        restored = 0
        order = sorted(allocations, key=lambda a: (a.opportunistic, -a.priority, a.started_at, a.job_id))
        for alloc in order:
            problem = self._check_persisted(alloc)
            if problem is not None:
                dropped.append(RestoreIssue(alloc.job_id, problem))
                continue
            job = RunningJob(
                job_id=alloc.job_id,
                vc=alloc.vc,
                user=alloc.user,
                priority=alloc.priority,
                opportunistic=alloc.opportunistic,
                started_at=alloc.started_at,
                lazy_preemption=alloc.lazy_preemption,
                max_runtime=alloc.max_runtime,
                min_runtime=alloc.min_runtime,
                lazy_preempted=alloc.lazy_preempted,
            )
            mark = self.topology.mark()
            problem = None if alloc.opportunistic else self._rebind(job, alloc)
            if problem is not None:
                self.topology.rollback(mark)
                job.opportunistic = True
                job.pods = []
                demoted.append(RestoreIssue(alloc.job_id, problem))
            if job.opportunistic:
                for pod in alloc.pods:
                    node = self.topology.nodes[pod.node]
                    self.ledger.add_pod(job, RunningPod(pod.task_role, pod.index, node, tuple(pod.devices), None))
            self.ledger.register(job)
            self.topology.commit()
            restored += 1
        return RestoreReport(restored=restored, demoted=tuple(demoted), dropped=tuple(dropped))

    def _check_persisted(self, alloc: Allocation) -> str | None:
        if alloc.job_id in self.ledger.jobs:
            return "the job is listed twice"
        taken: set[tuple[str, int]] = set()
        for pod in alloc.pods:
            node = self.topology.nodes.get(pod.node)
            if node is None:
                return f"node {pod.node!r} no longer exists"
            if not pod.devices:
                return f"pod {pod.task_role}[{pod.index}] has no devices"
            for d in pod.devices:
                if not 0 <= d < node.size:
                    return f"node {pod.node!r} has no device {d}"
                if node.jobs[d] is not None or (pod.node, d) in taken:
                    return f"device {d} of node {pod.node!r} is also used by job {node.jobs[d] or alloc.job_id!r}"
                taken.add((pod.node, d))
        if not alloc.pods:
            return "the job has no pods"
        return None

    def _rebind(self, job: RunningJob, alloc: Allocation) -> str | None:
        vc = self.vcs.get(alloc.vc)
        if vc is None:
            return f"VC {alloc.vc!r} no longer exists"
        for pod in alloc.pods:
            node = self.topology.nodes[pod.node]
            devices = tuple(pod.devices)
            binding = self._binding_for(vc, node, devices, pod.vc_cell, pod.lent_by)
            if isinstance(binding, str):
                return f"pod {pod.task_role}[{pod.index}]: {binding}"
            self.ledger.add_pod(job, RunningPod(pod.task_role, pod.index, node, devices, binding))
        return None

    def _binding_for(
        self, vc: VcState, node, devices: tuple[int, ...], vc_cell: str | None, lent_by: str | None
    ) -> Binding | str:
        holder = self.topology.smallest_cell_holding(node, devices)
        existing = next((c.binding for c in holder.up if c.binding is not None), None)
        if existing is not None:
            if existing.user != vc.name:
                return f"its devices are in a cell bound to VC {existing.user!r}"
            if vc_cell is not None and existing.cell.address != vc_cell:
                return f"its devices are in VC cell {existing.cell.address!r}, not {vc_cell!r}"
            return existing
        owner = vc
        if lent_by is not None:
            lender = self.vcs.get(lent_by)
            if lender is None or lender.name not in self._lender_names(vc):
                return f"VC {lent_by!r} can no longer lend to VC {vc.name!r}"
            owner = lender
        if vc_cell is not None:
            cell = self.topology.by_address.get(vc_cell)
            if cell is None or cell not in holder.up:
                return f"cell {vc_cell!r} does not hold its devices"
            choices = [cell]
        else:
            choices = [c for c in holder.up if (c.chain.sku.name, c.tid) in owner.quota]
        sku = node.chain.sku.name
        for cell in choices:
            if owner.unbound(sku, cell.tid) <= 0:
                continue
            if not any(c.free for c in cell.up) or cell.has_pinned:
                continue
            mark = self.topology.mark()
            binding = self.ledger.new_binding(cell, owner.name, vc.name)
            if cell.chain.is_safe():
                return binding
            self.topology.rollback(mark)
        return f"VC {owner.name!r} has no unused {sku} cell that holds its devices"

    # --- introspection ----------------------------------------------------------------

    def allocations(self) -> tuple[Allocation, ...]:
        return tuple(self.ledger.jobs[j].allocation(self.topology) for j in sorted(self.ledger.jobs))

    def node_status(self, node: str) -> NodeStatus:
        try:
            target = self.topology.nodes[node]
        except KeyError:
            raise ValueError(f"unknown node {node!r}") from None
        used = tuple(
            DeviceUse(i, job, target.opp[i]) for i, job in enumerate(target.jobs) if job is not None
        )
        return NodeStatus(target.name, target.chain.sku.name, target.healthy, target.size, used)

    def vc_status(self, vc: str) -> VcStatus:
        try:
            state = self.vcs[vc]
        except KeyError:
            raise ValueError(f"unknown VC {vc!r}") from None
        counts: dict[tuple[str, int], list[int]] = {}  # key -> [used, borrowed, lent]
        for other in self.vcs.values():
            for by_cell in other.bindings.values():
                for b in by_cell.values():
                    if b.pinned:
                        continue
                    key = (b.cell.chain.sku.name, b.cell.tid)
                    if b.owner == vc and b.user == vc:
                        counts.setdefault(key, [0, 0, 0])[0] += 1
                    elif b.user == vc:
                        counts.setdefault(key, [0, 0, 0])[1] += 1
                    elif b.owner == vc:
                        counts.setdefault(key, [0, 0, 0])[2] += 1
        chains = self.topology.chains
        keys = sorted(
            set(state.quota) | set(counts),
            key=lambda k: (self._sku_order.index(k[0]), chains[k[0]].level[k[1]], chains[k[0]].names[k[1]]),
        )
        bad_by_chain = {sku: self._bad_cells(chain) for sku, chain in self.topology.chains.items()}
        rows = []
        for key in keys:
            sku, tid = key
            chain = self.topology.chains[sku]
            used, borrowed, lent = counts.get(key, [0, 0, 0])
            guaranteed = state.quota.get(key, 0)
            bad = bad_by_chain[sku].get((vc, tid), 0)
            rows.append(
                CellTypeStatus(
                    cell_type=chain.names[tid],
                    level=chain.level[tid],
                    guaranteed=guaranteed,
                    used=used,
                    free=guaranteed - used - lent - bad,
                    bad=bad,
                    borrowed=borrowed,
                    lent=lent,
                )
            )
        used_leaves = tuple((s, state.used_leaves.get(s, 0)) for s in self._sku_order if s in state.skus())
        opportunistic: dict[str, int] = {}
        for job in self.ledger.opportunistic.values():
            if job.vc == vc:
                for pod in job.pods:
                    name = pod.node.chain.sku.name
                    opportunistic[name] = opportunistic.get(name, 0) + len(pod.devices)
        return VcStatus(
            vc=vc,
            cells=tuple(rows),
            used_leaf_cells=used_leaves,
            opportunistic_leaf_cells=tuple(sorted(opportunistic.items())),
            pinned_cells=tuple(sorted(state.pinned)),
        )

    def _bad_cells(self, chain: Chain) -> dict[tuple[str, int], int]:
        """Unbound guaranteed cells healthy free cells cannot back, shared out among the
        VCs that have them in proportion to their unbound counts (largest remainder)."""
        supply = [0] * len(chain.names)

        def healthy_parts(cell: Cell) -> None:
            if all(n.healthy for n in cell.nodes) if cell.node is None else cell.node.healthy:
                supply[cell.tid] += 1
            elif cell.level > chain.node_level:
                for child in cell.children:
                    healthy_parts(child)

        def walk(cell: Cell) -> None:
            if cell.free:
                healthy_parts(cell)
            elif any(cell.free_below):
                for child in cell.children:
                    walk(child)

        for root in chain.roots:
            walk(root)
        short = chain.shortfall(supply)
        out: dict[tuple[str, int], int] = {}
        sku = chain.sku.name
        for tid in chain.order:
            if not short[tid]:
                continue
            holders = sorted((s.name, s.unbound(sku, tid)) for s in self.vcs.values() if s.unbound(sku, tid) > 0)
            total = sum(n for _, n in holders)
            shares = [(name, short[tid] * n // total, short[tid] * n % total) for name, n in holders]
            left = short[tid] - sum(s for _, s, _ in shares)
            for i, (name, base, _) in enumerate(sorted(shares, key=lambda s: (-s[2], s[0]))):
                out[(name, tid)] = base + (1 if i < left else 0)
        return out
