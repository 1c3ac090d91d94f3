"""What users and operators see: per-VC cells by type and per-node devices."""

from __future__ import annotations

from .cells import Cell, Chain, Topology
from .decisions import CellTypeStatus, DeviceUse, NodeStatus, VcStatus
from .ledger import Ledger
from .quota import VcState


def node_status(topology: Topology, node: str) -> NodeStatus:
    try:
        target = topology.nodes[node]
    except KeyError:
        raise ValueError(f"unknown node {node!r}") from None
    used = tuple(
        DeviceUse(i, job, bool(target.opp[i])) for i, job in enumerate(target.jobs) if job is not None
    )
    return NodeStatus(target.name, target.chain.sku.name, target.healthy, target.size, used)


def vc_status(
    topology: Topology, ledger: Ledger, vcs: dict[str, VcState], sku_order: list[str], vc: str
) -> VcStatus:
    try:
        state = vcs[vc]
    except KeyError:
        raise ValueError(f"unknown VC {vc!r}") from None
    counts: dict[tuple[str, int], list[int]] = {}  # key -> [used, borrowed, lent]
    for other in vcs.values():
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
    chains = topology.chains
    keys = sorted(
        set(state.quota) | set(counts),
        key=lambda k: (sku_order.index(k[0]), chains[k[0]].level[k[1]], chains[k[0]].names[k[1]]),
    )
    bad_by_chain = {sku: bad_cells(chain, vcs) for sku, chain in topology.chains.items()}
    rows = []
    for key in keys:
        sku, tid = key
        chain = topology.chains[sku]
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
    used_leaves = tuple((s, state.used_leaves.get(s, 0)) for s in sku_order if s in state.skus())
    opportunistic: dict[str, int] = {}
    for job in ledger.opportunistic.values():
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


def bad_cells(chain: Chain, vcs: dict[str, VcState]) -> dict[tuple[str, int], int]:
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
        holders = sorted((s.name, s.unbound(sku, tid)) for s in vcs.values() if s.unbound(sku, tid) > 0)
        total = sum(n for _, n in holders)
        shares = [(name, short[tid] * n // total, short[tid] * n % total) for name, n in holders]
        left = short[tid] - sum(s for _, s, _ in shares)
        for i, (name, base, _) in enumerate(sorted(shares, key=lambda s: (-s[2], s[0]))):
            out[(name, tid)] = base + (1 if i < left else 0)
    return out
