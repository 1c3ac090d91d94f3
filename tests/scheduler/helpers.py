"""Small clusters and gangs described in a few lines, for the scenario tests."""

from __future__ import annotations

from dataclasses import replace

from scheduler import (
    CellTypeSpec,
    ClusterSpec,
    CycleResult,
    Engine,
    GangRequest,
    PhysicalCellSpec,
    PodRequest,
    SkuSpec,
    VirtualClusterSpec,
)

A100 = SkuSpec("A100", gpu=1, cpu=12, memory_mb=110_000)
V100 = SkuSpec("V100", gpu=1, cpu=6, memory_mb=60_000)
CPU = SkuSpec("CPU", gpu=0, cpu=4, memory_mb=16_000)

# 8-GPU A100 nodes (4 PCIe switches of 2) in racks of 2 nodes.
A100_TYPES = (
    CellTypeSpec("A100-SWITCH", "A100", 2),
    CellTypeSpec("A100-NODE", "A100-SWITCH", 4, is_node=True),
    CellTypeSpec("A100-RACK", "A100-NODE", 2),
)
# 16-GPU V100 nodes: PCIe switch of 2, CPU socket of 4 switches, 2 sockets.
V100_TYPES = (
    CellTypeSpec("V100-SWITCH", "V100", 2),
    CellTypeSpec("V100-SOCKET", "V100-SWITCH", 4),
    CellTypeSpec("V100-NODE", "V100-SOCKET", 2, is_node=True),
)
# CPU nodes of 8 leaf cells (32 cpu).
CPU_TYPES = (CellTypeSpec("CPU-NODE", "CPU", 8, is_node=True),)


def rack(name: str, *nodes: str, pinned: dict[str, str] | None = None) -> PhysicalCellSpec:
    pinned = pinned or {}
    return PhysicalCellSpec(
        "A100-RACK", name, tuple(PhysicalCellSpec("A100-NODE", n, pinned_id=pinned.get(n)) for n in nodes)
    )


def a100_cluster(*racks: PhysicalCellSpec) -> ClusterSpec:
    return ClusterSpec(skus=(A100,), cell_types=A100_TYPES, physical_cells=tuple(racks))


def mixed_cluster() -> ClusterSpec:
    """Two A100 racks (a1..a4), one pinned A100 node (a5), two 16-GPU V100 nodes, two CPU nodes."""
    return ClusterSpec(
        skus=(A100, V100, CPU),
        cell_types=A100_TYPES + V100_TYPES + CPU_TYPES,
        physical_cells=(
            rack("r1", "a1", "a2"),
            rack("r2", "a3", "a4"),
            PhysicalCellSpec("A100-NODE", "a5", pinned_id="pin-a5"),
            PhysicalCellSpec("V100-NODE", "v1"),
            PhysicalCellSpec("V100-NODE", "v2"),
            PhysicalCellSpec("CPU-NODE", "c1"),
            PhysicalCellSpec("CPU-NODE", "c2"),
        ),
    )


def vc(name: str, *cells: tuple[str, int], **kw) -> VirtualClusterSpec:
    return VirtualClusterSpec(name=name, cells=tuple(cells), **kw)


def gang(
    job_id: str,
    vc: str,
    *roles: tuple[int, int] | tuple[int, int, str],
    sku: str | None = "A100",
    priority: int = 10,
    user: str = "alice",
    at: float = 0.0,
    pinned: str | None = None,
    **kw,
) -> GangRequest:
    """``roles``: (pods, leaf cells per pod[, role name]); role names default to r0, r1..."""
    pods = []
    for i, role in enumerate(roles or ((1, 1),)):
        count, leaves = role[0], role[1]
        name = role[2] if len(role) > 2 else f"r{i}"
        pods += [PodRequest(name, j, sku, leaves, pinned_cell=pinned) for j in range(count)]
    return GangRequest(job_id, vc, user, priority, tuple(pods), submitted_at=at, **kw)


def placed(result, job_id: str) -> dict[tuple[str, int], tuple[str, tuple[int, ...]]]:
    """{(role, index): (node, devices)} of a job placed in this cycle."""
    for alloc in result.placements:
        if alloc.job_id == job_id:
            return {(p.task_role, p.index): (p.node, p.devices) for p in alloc.pods}
    raise AssertionError(f"{job_id} was not placed; waiting: {waiting(result)}")


def nodes_of(result, job_id: str) -> list[str]:
    return sorted({node for node, _ in placed(result, job_id).values()})


def waiting(result) -> dict[str, str]:
    return {w.job_id: w.reason for w in result.waiting}


def status(engine: Engine, vc: str) -> dict[str, tuple[int, int, int, int, int, int]]:
    """{cell type: (guaranteed, used, free, bad, borrowed, lent)}"""
    return {
        row.cell_type: (row.guaranteed, row.used, row.free, row.bad, row.borrowed, row.lent)
        for row in engine.vc_status(vc).cells
    }


def settle(engine: Engine, queue, now: float, cycles: int = 5) -> CycleResult:
    """Cycles at ``now``, ``now + 1``, ... until every gang of ``queue`` is placed or
    rejected or a cycle changes nothing; the victims a cycle tells to stop are released
    after it, as the worker does once their pods are gone. Returns every preemption and
    placement of those cycles, with the last cycle's waits and reservations."""
    queue = list(queue)
    preemptions, placements, rejected, result = [], [], [], None
    for i in range(cycles):
        result = engine.schedule(queue, now + i)
        preemptions += result.preemptions
        placements += result.placements
        rejected += result.rejected
        done = {a.job_id for a in result.placements} | {r.job_id for r in result.rejected}
        queue = [g for g in queue if g.job_id not in done]
        for p in result.preemptions:
            if not p.lazy:
                engine.release(p.job_id)
        if not queue or not (result.preemptions or result.placements or result.reservations):
            break
    return replace(
        result, placements=tuple(placements), preemptions=tuple(preemptions), rejected=tuple(rejected)
    )
