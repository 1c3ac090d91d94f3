"""Turning a queued gang into the ways it can run, or refusing it for good."""

from __future__ import annotations

from dataclasses import dataclass

from .cells import Chain, Topology
from .errors import InvalidRequestError
from .placement import PodNeed
from .quota import VcState
from .spec import MAX_PRIORITY, GangRequest, leaf_cells_for


@dataclass(frozen=True)
class GangOption:
    """One way to run a gang (one SKU choice): its pods' needs, and its shape, which is
    all that decides whether it fits and so keys a cycle's failure cache."""

    needs: list[PodNeed]
    shape: tuple


class RequestChecker:
    """Validates gangs against the configuration, and remembers what is fixed by it:
    whom each VC may borrow from, which SKUs it can use, the largest cell it can use
    and how much it may borrow, per SKU."""

    def __init__(self, topology: Topology, vcs: dict[str, VcState], sku_order: list[str]) -> None:
        self.topology = topology
        self.vcs = vcs
        self.sku_order = sku_order
        self.cohorts: dict[str, list[str]] = {}
        for name in sorted(vcs):
            cohort = vcs[name].spec.cohort
            if cohort is not None:
                self.cohorts.setdefault(cohort, []).append(name)
        self.lenders: dict[str, list[str]] = {}
        self.usable_skus: dict[str, list[str]] = {}
        self.largest: dict[str, dict[str, int]] = {}
        self.borrowable: dict[str, dict[str, int]] = {}
        for name, state in vcs.items():
            lenders = []
            if state.spec.cohort is not None and state.spec.borrowing_limit != 0:
                lenders = [n for n in self.cohorts[state.spec.cohort] if n != name and vcs[n].spec.lending_limit != 0]
            self.lenders[name] = lenders
            self.usable_skus[name] = sorted(set(state.skus()).union(*(vcs[n].skus() for n in lenders)))
            self.largest[name] = {}
            self.borrowable[name] = {}
            for sku, chain in topology.chains.items():
                self.largest[name][sku] = max(
                    [state.largest_cell_leaves(chain)] + [vcs[n].largest_cell_leaves(chain) for n in lenders]
                )
                lendable = sum(self._lendable(vcs[n], chain) for n in lenders)
                if state.spec.borrowing_limit is not None:
                    lendable = min(lendable, state.spec.borrowing_limit)
                self.borrowable[name][sku] = lendable
        # Resolved requests by job id; a queue is mostly the same gangs cycle after cycle.
        self._resolved: dict[str, tuple[GangRequest, list[GangOption] | InvalidRequestError]] = {}

    def keep_only(self, job_ids: set[str]) -> None:
        """Forget resolved requests no longer queued."""
        self._resolved = {j: self._resolved[j] for j in sorted(job_ids) if j in self._resolved}

    def cohort_of(self, vc: VcState) -> list[str]:
        return self.cohorts.get(vc.spec.cohort or "", [])

    def options(self, gang: GangRequest) -> list[GangOption]:
        """The ways a gang can run, remembered by job id; raises :class:`InvalidRequestError`."""
        cached = self._resolved.get(gang.job_id)
        if cached is None or not (cached[0] is gang or cached[0] == gang):
            try:
                result: list[GangOption] | InvalidRequestError = [
                    GangOption(needs, tuple(sorted((n.sku, n.leaf_cells, n.pinned_cell or "") for n in needs)))
                    for needs in self.resolve(gang)
                ]
            except InvalidRequestError as e:
                result = e
            cached = self._resolved[gang.job_id] = (gang, result)
        if isinstance(cached[1], InvalidRequestError):
            raise cached[1]
        return cached[1]

    def resolve(self, gang: GangRequest) -> list[list[PodNeed]]:
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
        vc_skus = self.usable_skus[vc.name]
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
                    s for s in self.sku_order if s in vc_skus and (self.topology.chains[s].sku.gpu > 0) == wants_gpu
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
        pinned_totals: dict[str, int] = {}
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
                pinned_totals[need.pinned_cell] = pinned_totals.get(need.pinned_cell, 0) + need.leaf_cells
                if pinned_totals[need.pinned_cell] > cell.leaves:
                    raise InvalidRequestError(
                        "taskRoles",
                        f"the job needs {pinned_totals[need.pinned_cell]} {need.sku} in pinned cell "
                        f"{need.pinned_cell!r}, which holds {cell.leaves}",
                    )
                continue
            if gang.opportunistic:
                continue
            largest = self.largest[vc.name][need.sku]
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
            lendable = self.borrowable[vc.name][sku]
            if total > own + lendable:
                extra = f" plus {lendable} it may borrow" if lendable else ""
                raise InvalidRequestError(
                    "taskRoles",
                    f"the job needs {total} {sku} but VC {vc.name!r} can never hold more than {own}{extra}",
                )

    def _lendable(self, lender: VcState, chain: Chain) -> int:
        total = lender.quota_leaves(chain)
        limit = lender.spec.lending_limit
        return total if limit is None else min(total, limit)
