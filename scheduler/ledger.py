"""Running jobs and the accounting that follows them: device use, VC bindings, VC and
user usage counters. Every change is undoable through the topology's undo log."""

from __future__ import annotations

from dataclasses import dataclass, field

from .cells import ANY_LINE, Binding, Cell, Node, Topology
from .decisions import Allocation, PodPlacement
from .quota import VcState, entry_name


@dataclass
class RunningPod:
    """``reserved``: the pod of a preempting gang, holding its binding (quota) but not
    yet its devices, which its victims' pods still use."""

    task_role: str
    index: int
    node: Node
    devices: tuple[int, ...]
    binding: Binding | None
    reserved: bool = False

# A job's state in the engine: running; preempting (placed, waiting for its victims'
# pods to be gone: its pods hold their quota, not yet their devices); terminating (a
# victim whose pods are being deleted: it holds its devices, no longer any quota).
RUNNING, PREEMPTING, TERMINATING = "running", "preempting", "terminating"


@dataclass
class RunningJob:
    job_id: str
    vc: str
    user: str
    priority: int
    opportunistic: bool
    started_at: float
    lazy_preemption: bool = False
    max_runtime: float | None = None
    min_runtime: float = 0.0
    lazy_preempted: bool = False
    pods: list[RunningPod] = field(default_factory=list)
    state: str = RUNNING
    # The SKUs its pods use, remembered once asked (pods do not change once it runs).
    sku_set: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def skus(self) -> frozenset[str]:
        if not self.sku_set:
            self.sku_set = frozenset(p.node.chain.sku.name for p in self.pods)
        return self.sku_set

    def ends_at(self) -> float | None:
        return None if self.max_runtime is None else self.started_at + self.max_runtime

    def allocation(self, topology: Topology) -> Allocation:
        pods = []
        for pod in sorted(self.pods, key=lambda p: (p.task_role, p.index)):
            b = pod.binding
            pods.append(
                PodPlacement(
                    task_role=pod.task_role,
                    index=pod.index,
                    node=pod.node.host,
                    devices=pod.node.host_devices(pod.devices),
                    cell_chain=topology.chain_addresses(topology.smallest_cell_holding(pod.node, pod.devices)),
                    vc_cell=None if b is None else b.cell.address,
                    lent_by=b.owner if b is not None and b.borrowed else None,
                    vc_entry=None if b is None or b.pinned else entry_name(b.cell.chain, b.cell.tid, b.line),
                )
            )
        return self._allocation(pods)

    def _allocation(self, pods: list[PodPlacement]) -> Allocation:
        return Allocation(
            job_id=self.job_id,
            vc=self.vc,
            user=self.user,
            priority=self.priority,
            opportunistic=self.opportunistic,
            lazy_preempted=self.lazy_preempted,
            started_at=self.started_at,
            pods=tuple(pods),
            lazy_preemption=self.lazy_preemption,
            max_runtime=self.max_runtime,
            min_runtime=self.min_runtime,
            state=self.state,
        )


class Ledger:
    def __init__(self, topology: Topology, vcs: dict[str, VcState]) -> None:
        self.topology = topology
        self.vcs = vcs
        self.jobs: dict[str, RunningJob] = {}
        # Indexes for choosing preemption victims without scanning every job.
        self.opportunistic: dict[str, RunningJob] = {}
        self.guaranteed_by_vc: dict[str, dict[str, RunningJob]] = {name: {} for name in vcs}
        self.limited: dict[str, RunningJob] = {}  # jobs with a maximum runtime
        self.graced: dict[str, RunningJob] = {}  # jobs with a minimum runtime
        self.preempting: dict[str, RunningJob] = {}
        self.terminating: dict[str, RunningJob] = {}
        # Bumped whenever capacity may have grown (a release, an unbind, a node turning
        # healthy): a gang that failed since the last bump cannot fit now either. A trial
        # that is rolled back restores it, as it leaves capacity exactly as it was.
        self.generation = 0
        # Names the state of the jobs (bindings change only with them): every change gets
        # a number never used before, and undoing it restores the previous one, so equal
        # versions mean equal states (what caches of derived lists key on).
        self.version = 0
        self._versions = 0

    @property
    def undo(self) -> list:
        return self.topology.undo

    def _bump(self) -> None:
        previous = self.version
        self._versions += 1
        self.version = self._versions
        self.undo.append(lambda: setattr(self, "version", previous))

    def _grow(self) -> None:
        previous = self.generation
        self.generation += 1
        self.undo.append(lambda: setattr(self, "generation", previous))

    # --- bindings -------------------------------------------------------------

    def new_binding(self, cell: Cell, owner: str, user: str, line: int = ANY_LINE) -> Binding:
        binding = Binding(cell, owner, user, line=line)
        self.topology.bind(cell, binding)
        self._attach(binding, 1)
        self.undo.append(lambda: self._attach(binding, -1))
        return binding

    def drop_binding(self, binding: Binding) -> None:
        self.topology.unbind(binding.cell)
        self._attach(binding, -1)
        self.undo.append(lambda: self._attach(binding, 1))
        self._grow()

    def _attach(self, binding: Binding, sign: int) -> None:
        cell = binding.cell
        sku = cell.chain.sku.name
        owner = self.vcs[binding.owner]
        user = self.vcs[binding.user]
        key = (sku, cell.tid, binding.line)
        owner.bound[key] = owner.bound.get(key, 0) + sign
        chain = cell.chain
        if binding.line == ANY_LINE:
            chain.demand[cell.tid] -= sign
        else:
            chain.line_demand[binding.line][cell.tid] -= sign
            chain.bound_demand -= sign
        by_cell = user.bindings.setdefault(sku, {})
        if sign > 0:
            by_cell[cell.id] = binding
        else:
            del by_cell[cell.id]
        if binding.borrowed:
            user.borrowed_leaves[sku] = user.borrowed_leaves.get(sku, 0) + sign * cell.leaves
            owner.lent_leaves[sku] = owner.lent_leaves.get(sku, 0) + sign * cell.leaves

    # --- pods and jobs ----------------------------------------------------------

    def _count(self, job: RunningJob, pod: RunningPod, sign: int) -> None:
        b = pod.binding
        if b is None:
            return
        n = sign * len(pod.devices)
        b.usage += n
        vc = self.vcs[b.user]
        sku = pod.node.chain.sku.name
        vc.used_leaves[sku] = vc.used_leaves.get(sku, 0) + n
        vc.user_leaves[job.user] = vc.user_leaves.get(job.user, 0) + n
        if not b.borrowed and not b.pinned:
            by_priority = vc.own_used_by_priority.setdefault(sku, {})
            by_priority[job.priority] = by_priority.get(job.priority, 0) + n

    def add_pod(self, job: RunningJob, pod: RunningPod) -> None:
        if not pod.reserved:
            self.topology.occupy(pod.node, pod.devices, job.job_id, job.opportunistic)
        job.pods.append(pod)
        self._count(job, pod, 1)
        self.undo.append(lambda: (self._count(job, pod, -1), job.pods.pop()))

    def _index(self, job: RunningJob, present: bool) -> None:
        self._bump()
        if job.state == PREEMPTING:
            mappings = [self.jobs, self.preempting]
        elif job.state == TERMINATING:
            mappings = [self.jobs, self.terminating]
        else:
            if job.opportunistic:
                index = self.opportunistic
            else:
                index = self.guaranteed_by_vc.setdefault(job.vc, {})
            mappings = [self.jobs, index]
            if job.max_runtime is not None:
                mappings.append(self.limited)
            if job.min_runtime > 0:
                mappings.append(self.graced)
        for mapping in mappings:
            if present:
                mapping[job.job_id] = job
            else:
                del mapping[job.job_id]

    def register(self, job: RunningJob) -> None:
        self._index(job, True)
        self.undo.append(lambda: self._index(job, False))

    def remove(self, job: RunningJob, keep_for: str | None = None) -> list[Binding]:
        """Release a job's devices and the bindings it alone kept bound. With
        ``keep_for`` (a preemption by a gang of that VC), the bindings that VC uses stay,
        for the preemptor to take over as HiveD does, and are returned: ``drop_unused``
        them afterwards. So do the cells that VC lent the job (a borrower preempted to
        take them back), bound to the VC again once no other borrower uses them: the
        preemptor runs in the cells it reclaims, so its victims hold devices it uses."""
        self._index(job, False)
        self.undo.append(lambda: self._index(job, True))
        kept = []
        reclaimed = []
        for pod in job.pods:
            if not pod.reserved:
                self.topology.vacate(pod.node, pod.devices)
            self._count(job, pod, -1)
            self.undo.append(lambda pod=pod: self._count(job, pod, 1))
            binding = pod.binding
            if binding is not None and binding.user == keep_for:
                kept.append(binding)
            elif binding is not None and keep_for is not None and binding.owner == keep_for:
                reclaimed.append(binding)
            else:
                self._drop_if_unused(binding)
        for binding in dict.fromkeys(reclaimed):
            if binding.usage == 0 and binding.cell.binding is binding:
                self.drop_binding(binding)
                kept.append(self.new_binding(binding.cell, binding.owner, binding.owner, binding.line))
        self._grow()
        return kept

    def drop_unused(self, bindings: list[Binding]) -> None:
        for binding in dict.fromkeys(bindings):
            if binding.cell.binding is binding:
                self._drop_if_unused(binding)

    def _set_state(self, job: RunningJob, state: str) -> None:
        self._index(job, False)
        self.undo.append(lambda: self._index(job, True))
        previous = job.state
        job.state = state
        self.undo.append(lambda: setattr(job, "state", previous))
        self._index(job, True)
        self.undo.append(lambda: self._index(job, False))

    def keep_devices(self, job: RunningJob) -> None:
        """A victim just removed and told to stop: its pods keep their devices until they
        are gone (``remove`` again), outside any VC's accounting."""
        for pod in job.pods:
            binding = pod.binding
            pod.binding = None
            self.undo.append(lambda pod=pod, binding=binding: setattr(pod, "binding", binding))
            self.topology.occupy(pod.node, pod.devices, job.job_id, job.opportunistic)
        previous = job.state
        job.state = TERMINATING
        self.undo.append(lambda: setattr(job, "state", previous))
        self._index(job, True)
        self.undo.append(lambda: self._index(job, False))

    def reserve(self, job: RunningJob) -> None:
        """A preemptor placed in a trial becomes preempting: it keeps its bindings and
        quota and gives its devices back to the victims still on them."""
        for pod in job.pods:
            self.topology.vacate(pod.node, pod.devices)
            pod.reserved = True
            self.undo.append(lambda pod=pod: setattr(pod, "reserved", False))
        self._set_state(job, PREEMPTING)

    def launch(self, job: RunningJob, now: float) -> None:
        """The victims are gone: the preemptor takes its devices and runs."""
        for pod in job.pods:
            self.topology.occupy(pod.node, pod.devices, job.job_id, job.opportunistic)
            pod.reserved = False
            self.undo.append(lambda pod=pod: setattr(pod, "reserved", True))
        started = job.started_at
        job.started_at = now
        self.undo.append(lambda: setattr(job, "started_at", started))
        self._set_state(job, RUNNING)

    def _drop_if_unused(self, binding: Binding | None) -> None:
        if binding is not None and binding.usage == 0 and not binding.pinned:
            self.drop_binding(binding)

    def demote(self, job: RunningJob) -> None:
        """Lazy preemption: the job keeps its devices but leaves its VC's accounting."""
        self._index(job, False)
        self.undo.append(lambda: self._index(job, True))
        for pod in job.pods:
            self._count(job, pod, -1)
            self.undo.append(lambda pod=pod: self._count(job, pod, 1))
            binding = pod.binding
            pod.binding = None
            self.undo.append(lambda pod=pod, binding=binding: setattr(pod, "binding", binding))
            self._drop_if_unused(binding)
            self.topology.set_opportunistic(pod.node, pod.devices, True)
        job.opportunistic = True
        job.lazy_preempted = True
        self.undo.append(lambda: (setattr(job, "opportunistic", False), setattr(job, "lazy_preempted", False)))
        self._index(job, True)
        self.undo.append(lambda: self._index(job, False))
        self._grow()
