"""Output shapes: placements, preemptions, wait reasons, status and restore reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PodPlacement:
    """Where one pod runs.

    ``cell_chain`` is the addresses from the top-level physical cell down to the smallest
    cell holding all the pod's devices (the node or a cell inside it). ``vc_cell`` is the
    address of the physical cell bound to the VC's virtual cell that holds the pod,
    ``vc_entry`` the quota entry it counts against (``A100-NODE``, or ``A100-RACK3.A100-NODE``
    for an entry naming its chain), and ``lent_by`` the VC whose quota that cell counts
    against when it is borrowed; all are ``None`` for opportunistic pods. Persist all of
    it: :meth:`Engine.restore` rebuilds the exact bindings from it.
    """

    task_role: str
    index: int
    node: str
    devices: tuple[int, ...]
    cell_chain: tuple[str, ...]
    vc_cell: str | None = None
    lent_by: str | None = None
    vc_entry: str | None = None


@dataclass(frozen=True)
class Allocation:
    job_id: str
    vc: str
    user: str
    priority: int
    opportunistic: bool
    lazy_preempted: bool
    started_at: float
    pods: tuple[PodPlacement, ...]
    lazy_preemption: bool = False
    max_runtime: float | None = None
    min_runtime: float = 0.0
    # "running"; "preempting": placed, waiting for ``victims`` to be gone before its pods
    # may be created; "terminating": a preempted job whose pods are being deleted.
    state: str = "running"
    victims: tuple[str, ...] = ()
    # A preempting gang whose victims were not yet told to stop (they are, at the next
    # cycle, if the preemption still holds): its pods are only planned.
    planned: bool = False


@dataclass(frozen=True)
class Preemption:
    """A victim to stop now. ``lazy``: it keeps running, demoted to opportunistic;
    otherwise its pods must be deleted: it keeps its devices (``state="terminating"``)
    until the caller, once they are gone, calls ``Engine.release`` for it."""

    job_id: str
    lazy: bool
    by_job: str


@dataclass(frozen=True)
class WaitInfo:
    """Why a job did not start this cycle, in terms of the state at the end of the
    cycle; ``position`` is its 1-based place among the waiting jobs of its VC, in the
    order the engine considers them."""

    job_id: str
    reason: str
    position: int


@dataclass(frozen=True)
class Rejection:
    """A queued gang that can never run (see :class:`InvalidRequestError`)."""

    job_id: str
    field: str
    message: str


@dataclass(frozen=True)
class ReservationInfo:
    """Devices held for a waiting gang, that no other gang may use. ``kind``:
    ``"preemption"`` — the gang preempts ``victims`` (``committed`` once they were told
    to stop) and runs when they are gone; ``"starvation"`` — the gang waited longer than
    its VC's threshold, and ``until`` is when the jobs on those devices, and those whose
    quota it needs, reach their maximum runtime (``None``: some declared none)."""

    job_id: str
    kind: str
    nodes: tuple[str, ...]
    devices: tuple[tuple[str, tuple[int, ...]], ...]  # (node, device indices)
    until: float | None = None
    victims: tuple[str, ...] = ()
    committed: bool = False
    # A starving gang's VC and the leaf cells of its quota held, per SKU: the VC's other
    # gangs may use only the rest of its quota unless they end before ``until``.
    vc: str | None = None
    leaf_cells: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class CycleResult:
    """``preemptions``: victims to stop now (see :class:`Preemption`); ``placements``:
    gangs whose pods may be created; ``reservations``: every reservation held at the
    end of the cycle."""

    placements: tuple[Allocation, ...]
    preemptions: tuple[Preemption, ...]
    waiting: tuple[WaitInfo, ...]
    rejected: tuple[Rejection, ...] = ()
    expired: tuple[str, ...] = ()
    reservations: tuple[ReservationInfo, ...] = ()


@dataclass(frozen=True)
class CellTypeStatus:
    """A VC's cells of one type (of one chain, when its quota entry names one: ``chain``
    is then the chain's top-level cell type). ``used`` and ``lent`` count its own virtual
    cells bound to physical cells (by its jobs, by borrowers); ``bad`` counts unused
    guaranteed cells that healthy free cells cannot back right now, the VC taken on its
    own; ``free = guaranteed - used - lent - bad``; ``borrowed`` counts other VCs' cells
    its jobs use."""

    cell_type: str
    level: int
    guaranteed: int
    used: int
    free: int
    bad: int
    borrowed: int
    lent: int
    chain: str | None = None


@dataclass(frozen=True)
class VcStatus:
    vc: str
    cells: tuple[CellTypeStatus, ...]
    used_leaf_cells: tuple[tuple[str, int], ...]
    opportunistic_leaf_cells: tuple[tuple[str, int], ...]
    pinned_cells: tuple[str, ...]


@dataclass(frozen=True)
class TypeCapacity:
    """One cell type of a chain (or of a SKU's pool, see :class:`ChainCapacity`): the
    physical ``cells`` of that type, the VCs' quota entries for it (``guaranteed``, as
    (VC, cells), most first), the pinned cells of that type VCs own (``pinned``), and
    ``spare``: how many more cells of the type one more quota entry could be guaranteed
    now, every guarantee kept (HiveD's safety invariant). Spares of different types
    count the same free cells at different sizes: they do not add up."""

    cell_type: str
    level: int
    cells: int
    guaranteed: tuple[tuple[str, int], ...]
    pinned: tuple[tuple[str, int], ...]
    spare: int


@dataclass(frozen=True)
class ChainCapacity:
    """A SKU's cells by type, top-down. ``chain`` is the chain's top-level cell type, and
    its rows count that chain's cells and the entries naming it (``CHAIN.TYPE``). The
    row with ``chain=None`` is the SKU's pool: every chain's cells, the entries naming no
    chain, and the spare for such an entry."""

    sku: str
    chain: str | None
    types: tuple[TypeCapacity, ...]


@dataclass(frozen=True)
class Shortage:
    """A quota entry the cluster cannot back: ``asked`` cells of ``cell_type`` (of
    ``chain``, or of any chain when ``None``) where ``free`` were left."""

    sku: str
    chain: str | None
    cell_type: str
    level: int
    asked: int
    free: int

    @property
    def short(self) -> int:
        return self.asked - self.free


@dataclass(frozen=True)
class DeviceUse:
    index: int
    job_id: str
    opportunistic: bool


@dataclass(frozen=True)
class NodeStatus:
    """``node``: the node-level cell's address; ``host``: the Kubernetes node it is on (the
    same, unless the host carries several SKUs); ``used``: by the host's device indices."""

    node: str
    sku: str
    healthy: bool
    devices: int
    used: tuple[DeviceUse, ...]
    host: str = ""


@dataclass(frozen=True)
class RestoreIssue:
    job_id: str
    reason: str


@dataclass(frozen=True)
class RestoreReport:
    """``demoted``: guaranteed placements that no longer fit the configuration and now
    run as opportunistic; ``dropped``: placements on nodes or devices that no longer
    exist (or collide), which the caller must stop; ``partial``: gangs kept on the nodes
    that still exist while some of their nodes are gone, whose attempts the caller must
    end (the engine holds their surviving pods' devices until ``release``)."""

    restored: int
    demoted: tuple[RestoreIssue, ...]
    dropped: tuple[RestoreIssue, ...]
    partial: tuple[RestoreIssue, ...] = ()
