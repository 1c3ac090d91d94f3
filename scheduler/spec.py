"""Input shapes: the cluster and VC configuration, and the gangs asking to run."""

from __future__ import annotations

import math
from dataclasses import dataclass

PRIORITY_CLASSES: dict[str, int] = {"prod": 100, "test": 10, "oppo": -1}
DEFAULT_PRIORITY = PRIORITY_CLASSES["test"]  # what a job without a priority class gets
MAX_PRIORITY = 1000


@dataclass(frozen=True)
class SkuSpec:
    """What one leaf cell brings; the leaf cell type has the same name as the SKU."""

    name: str
    gpu: int
    cpu: float
    memory_mb: int


@dataclass(frozen=True)
class CellTypeSpec:
    """A non-leaf cell type: ``child_count`` cells of type ``child``."""

    name: str
    child: str
    child_count: int
    is_node: bool = False


@dataclass(frozen=True)
class PhysicalCellSpec:
    """A physical cell. Node-level cells are addressed by the Kubernetes node name
    (devices 0..n-1) or, on a host carrying several SKUs, by the host name and the
    device index range its cells hold (``h1/4-7``: the host's devices 4 to 7); cells
    above the node level list their children. Cells below the node level are implied
    (``n1/0-1``, ``n1/2-3``... by the host's device indices): a node lists only those it
    names, to pin them (``pinned_id``), each under its parent cell."""

    cell_type: str
    address: str
    children: tuple["PhysicalCellSpec", ...] = ()
    pinned_id: str | None = None


def device_range(address: str) -> tuple[str, int, int | None]:
    """``(host, first, last)`` of a node-level or smaller cell's address: ``n1`` is
    ``("n1", 0, None)`` (the whole node), ``h1/4-7`` is ``("h1", 4, 7)`` and ``h1/4``
    ``("h1", 4, 4)``. ``ValueError`` names what is wrong with a malformed range."""
    host, slash, rest = address.partition("/")
    if not slash:
        return address, 0, None
    first, dash, last = rest.partition("-")
    if not host or not first.isdigit() or (dash and not last.isdigit()) or "/" in rest:
        raise ValueError(
            f"{address!r} is no node name nor a host's device range (host/first-last, e.g. {host or 'h1'}/4-7)"
        )
    lo, hi = int(first), int(last) if dash else int(first)
    if hi < lo:
        raise ValueError(f"{address!r}: the range's last device comes before its first")
    return host, lo, hi


@dataclass(frozen=True)
class ClusterSpec:
    skus: tuple[SkuSpec, ...]
    cell_types: tuple[CellTypeSpec, ...]
    physical_cells: tuple[PhysicalCellSpec, ...]


@dataclass(frozen=True)
class VirtualClusterSpec:
    name: str
    cells: tuple[tuple[str, int], ...]
    pinned_cells: tuple[str, ...] = ()
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    weight: float = 1.0
    max_leaf_cells_per_user: int | None = None
    # Seconds a guaranteed gang of the VC waits before it holds a reservation (devices and
    # quota); ``None``: the engine's default.
    starvation_threshold: float | None = None


@dataclass(frozen=True)
class PodRequest:
    """One pod of a gang.

    With ``sku=None`` the engine picks a SKU of the VC (GPU SKUs when ``gpu > 0``, CPU
    SKUs otherwise, in the cluster's SKU order) and computes the leaf cells from
    ``gpu``/``cpu``/``memory_mb`` with :func:`leaf_cells_for`; when those are all zero
    ``leaf_cells`` is used as is.
    """

    task_role: str
    index: int
    sku: str | None
    leaf_cells: int
    pinned_cell: str | None = None
    gpu: int = 0
    cpu: float = 0.0
    memory_mb: int = 0


@dataclass(frozen=True)
class GangRequest:
    """A job: every pod of every task role, placed all together or not at all."""

    job_id: str
    vc: str
    user: str
    priority: int
    pods: tuple[PodRequest, ...]
    submitted_at: float
    lazy_preemption: bool = False
    max_runtime: float | None = None
    min_runtime: float = 0.0

    @property
    def opportunistic(self) -> bool:
        return self.priority < 0


def priority_from_class(name: str) -> int:
    """The integer priority of an OpenPAI priority class (``prod``, ``test``, ``oppo``)."""
    try:
        return PRIORITY_CLASSES[name]
    except KeyError:
        known = ", ".join(sorted(PRIORITY_CLASSES))
        raise ValueError(f"unknown priority class {name!r}; known: {known}") from None


def leaf_cells_for(sku: SkuSpec, gpu: int, cpu: float, memory_mb: int) -> int:
    """OpenPAI's rule: ``ceil(max(gpu / sku.gpu, cpu / sku.cpu, memory / sku.memory))``.

    A resource the SKU does not provide (0 per leaf) only counts when asked for, and then
    the SKU cannot serve the task at all (``ValueError``).
    """
    ratios = [0.0]
    for asked, per_leaf, what in ((gpu, sku.gpu, "gpu"), (cpu, sku.cpu, "cpu"), (memory_mb, sku.memory_mb, "memory")):
        if asked <= 0:
            continue
        if per_leaf <= 0:
            raise ValueError(f"SKU {sku.name!r} provides no {what}")
        ratios.append(asked / per_leaf)
    return max(1, math.ceil(max(ratios) - 1e-9))
