"""Rebuilding the running state from persisted placements after a restart or a
configuration change."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from .cells import ANY_LINE, Binding, Cell, Node, Topology
from .decisions import Allocation, RestoreIssue, RestoreReport
from .ledger import PREEMPTING, RUNNING, TERMINATING, Ledger, RunningJob, RunningPod
from .pending import PendingPreemption, plan_scopes
from .quota import VcState, entry_name


class Restorer:
    def __init__(
        self, topology: Topology, ledger: Ledger, vcs: dict[str, VcState], lenders: dict[str, list[str]]
    ) -> None:
        self.topology = topology
        self.ledger = ledger
        self.vcs = vcs
        self.lenders = lenders

    def restore(self, allocations: Sequence[Allocation], pending: dict[str, PendingPreemption]) -> RestoreReport:
        """Replace the running state with persisted placements.

        Guaranteed placements rebind their VC's virtual cells exactly as recorded
        (``PodPlacement.vc_cell``/``vc_entry``/``lent_by``; without them, the smallest
        fitting cell of the VC's quota). One that no longer fits the configuration (quota
        gone, cell taken, safety) runs on as opportunistic and is listed as demoted. A
        gang with some of its nodes gone (renamed, removed) keeps its pods on the others
        and is listed as partial: the caller ends the job's attempt, and its pods there
        hold their devices until then. One with all its nodes gone, on devices that no
        longer exist, or colliding with another, is listed as dropped.

        Preempted jobs whose pods are being deleted keep their devices; preempting gangs
        get their reservations back (a committed one its quota too) for the victims
        still listed; one that no longer can is forgotten and decides again.
        """
        pending.clear()
        for job_id in sorted(self.ledger.jobs):
            self.ledger.remove(self.ledger.jobs[job_id])
        self.topology.commit()
        demoted: list[RestoreIssue] = []
        dropped: list[RestoreIssue] = []
        partial: list[RestoreIssue] = []
        restored = 0
        order = sorted(
            (a for a in allocations if a.state != PREEMPTING),
            key=lambda a: (a.opportunistic, -a.priority, a.started_at, a.job_id),
        )
        nodes = self.topology.nodes
        for alloc in order:
            alloc = self._internal(alloc)
            gone = (
                sorted({p.node for p in alloc.pods if p.node not in nodes})
                if any(p.node not in nodes for p in alloc.pods) else ()
            )
            if gone and len(gone) < len({p.node for p in alloc.pods}):
                # Its pods elsewhere may still run: keep their devices until the job ends.
                alloc = replace(alloc, pods=tuple(p for p in alloc.pods if p.node in self.topology.nodes))
                names = ", ".join(repr(n) for n in gone)
                what = f"nodes {names} no longer exist" if len(gone) > 1 else f"node {names} no longer exists"
                partial.append(RestoreIssue(alloc.job_id, what))
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
                state=TERMINATING if alloc.state == TERMINATING else RUNNING,
            )
            mark = self.topology.mark()
            problem = None if alloc.opportunistic or job.state == TERMINATING else self._rebind(job, alloc)
            if problem is not None:
                self.topology.rollback(mark)
                job.opportunistic = True
                job.pods = []
                demoted.append(RestoreIssue(alloc.job_id, problem))
            if job.opportunistic or job.state == TERMINATING:
                for pod in alloc.pods:
                    node = self.topology.nodes[pod.node]
                    self.ledger.add_pod(job, RunningPod(pod.task_role, pod.index, node, tuple(pod.devices), None))
            self.ledger.register(job)
            self.topology.commit()
            restored += 1
        for alloc in sorted(
            (a for a in allocations if a.state == PREEMPTING), key=lambda a: (a.planned, -a.priority, a.job_id)
        ):
            if self._restore_pending(alloc, pending):
                restored += 1
        kept = {a.job_id for a in order if a.job_id in self.ledger.jobs}
        return RestoreReport(
            restored=restored, demoted=tuple(demoted), dropped=tuple(dropped),
            partial=tuple(i for i in partial if i.job_id in kept),
        )

    def _internal(self, alloc: Allocation) -> Allocation:
        """A persisted placement names hosts and their device indices: on hosts carrying
        several SKUs, the node of each pod's SKU and its own indices instead. A pod whose
        devices are in no node of its host keeps the host's name, which no node has."""
        if not self.topology.hosts or not any(p.node in self.topology.hosts for p in alloc.pods):
            return alloc
        pods = []
        for pod in alloc.pods:
            node, own = self.topology.locate(pod.node, pod.devices)
            pods.append(pod if node is None else replace(pod, node=node.name, devices=own))
        return replace(alloc, pods=tuple(pods))

    def _restore_pending(self, alloc: Allocation, pending: dict[str, PendingPreemption]) -> bool:
        victims = [v for v in alloc.victims if v in self.ledger.jobs]
        if alloc.job_id in self.ledger.jobs or alloc.job_id in pending:
            return False
        for pod in alloc.pods:
            node, own = self.topology.locate(pod.node, tuple(pod.devices))
            if node is None or not own or not all(0 <= d < node.size for d in own):
                return False
        job = None
        if alloc.planned:
            if not all(self.ledger.jobs[v].state == RUNNING for v in victims):
                return False
        else:
            job = RunningJob(
                job_id=alloc.job_id, vc=alloc.vc, user=alloc.user, priority=alloc.priority, opportunistic=False,
                started_at=alloc.started_at, lazy_preemption=alloc.lazy_preemption, max_runtime=alloc.max_runtime,
                min_runtime=alloc.min_runtime, state=PREEMPTING,
            )
            mark = self.topology.mark()
            if self._rebind(job, self._internal(alloc), reserved=True) is not None:
                self.topology.rollback(mark)
                return False
            self.ledger.register(job)
            self.topology.commit()
        pending[alloc.job_id] = PendingPreemption(
            job_id=alloc.job_id, vc=alloc.vc, user=alloc.user, priority=alloc.priority, decided_at=alloc.started_at,
            victims=victims, pods=alloc.pods if job is None else job.allocation(self.topology).pods,
            scopes=plan_scopes(self.topology, alloc.pods), job=job,
        )
        return True

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

    def _rebind(self, job: RunningJob, alloc: Allocation, reserved: bool = False) -> str | None:
        vc = self.vcs.get(alloc.vc)
        if vc is None:
            return f"VC {alloc.vc!r} no longer exists"
        for pod in alloc.pods:
            node = self.topology.nodes[pod.node]
            devices = tuple(pod.devices)
            binding = self._binding_for(vc, node, devices, pod.vc_cell, pod.lent_by, pod.vc_entry)
            if isinstance(binding, str):
                return f"pod {pod.task_role}[{pod.index}]: {binding}"
            self.ledger.add_pod(job, RunningPod(pod.task_role, pod.index, node, devices, binding, reserved=reserved))
        return None

    def _binding_for(
        self, vc: VcState, node: Node, devices: tuple[int, ...], vc_cell: str | None, lent_by: str | None,
        vc_entry: str | None,
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
            if lender is None or lender.name not in self.lenders[vc.name]:
                return f"VC {lent_by!r} can no longer lend to VC {vc.name!r}"
            owner = lender
        if vc_cell is not None:
            cell = self.topology.by_address.get(vc_cell)
            if cell is None or cell not in holder.up:
                return f"cell {vc_cell!r} does not hold its devices"
            choices = [cell]
        else:
            choices = list(holder.up)
        sku = node.chain.sku.name
        for cell, line in self._entries(owner, choices, vc_entry):
            if owner.unbound(sku, cell.tid, line) <= 0:
                continue
            if owner is not vc:
                limit, lend = vc.spec.borrowing_limit, owner.spec.lending_limit
                if limit is not None and vc.total_borrowed() + cell.leaves > limit:
                    return f"VC {vc.name!r} may borrow only {limit} leaf cells"
                if lend is not None and owner.total_lent() + cell.leaves > lend:
                    return f"VC {owner.name!r} may lend only {lend} leaf cells"
            if not any(c.free for c in cell.up) or cell.has_pinned:
                continue
            mark = self.topology.mark()
            binding = self.ledger.new_binding(cell, owner.name, vc.name, line)
            if cell.chain.is_safe():
                return binding
            self.topology.rollback(mark)
        return f"VC {owner.name!r} has no unused {sku} cell that holds its devices"

    @staticmethod
    def _entries(owner: VcState, cells: list[Cell], recorded: str | None) -> list[tuple[Cell, int]]:
        """(cell, line of the quota entry) to try, in order: the entry the placement
        recorded, then entries naming the cell's chain, then the entry naming none."""
        out = []
        for cell in cells:
            chain = cell.chain
            lines = [
                line for tid, line in owner.quota_entries(chain.sku.name)
                if tid == cell.tid and line in (ANY_LINE, cell.line)
            ]
            if len(lines) > 1:
                lines.sort(key=lambda line: (entry_name(chain, cell.tid, line) != recorded, line == ANY_LINE))
            out += [(cell, line) for line in lines]
        return out
