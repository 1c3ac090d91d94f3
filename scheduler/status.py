"""What users and operators see: per-VC cells by type and per-node devices."""

from __future__ import annotations

from .cells import ANY_LINE, Cell, Chain, Topology
from .decisions import CellTypeStatus, DeviceUse, NodeStatus, VcStatus
from .ledger import Ledger
from .quota import VcState


def node_status(topology: Topology, node: str) -> NodeStatus:
    """A node by its address (on a host carrying several SKUs, ``h1/4-7``); device
    indices are the host's."""
    try:
        target = topology.nodes[node]
    except KeyError:
        raise ValueError(f"unknown node {node!r}") from None
    at = target.offset
    used = tuple(
        DeviceUse(at + i, job, bool(target.opp[i])) for i, job in enumerate(target.jobs) if job is not None
    )
    return NodeStatus(target.name, target.chain.sku.name, target.healthy, target.size, used, target.host)


def vc_status(
    topology: Topology, ledger: Ledger, vcs: dict[str, VcState], sku_order: list[str], vc: str
) -> VcStatus:
    try:
        state = vcs[vc]
    except KeyError:
        raise ValueError(f"unknown VC {vc!r}") from None
    counts: dict[tuple[str, int, int], list[int]] = {}  # quota key -> [used, borrowed, lent]
    for other in vcs.values():
        for by_cell in other.bindings.values():
            for b in by_cell.values():
                if b.pinned:
                    continue
                key = (b.cell.chain.sku.name, b.cell.tid, b.line)
                if b.owner == vc and b.user == vc:
                    counts.setdefault(key, [0, 0, 0])[0] += 1
                elif b.user == vc:
                    counts.setdefault(key, [0, 0, 0])[1] += 1
                elif b.owner == vc:
                    counts.setdefault(key, [0, 0, 0])[2] += 1
    chains = topology.chains
    keys = sorted(
        set(state.quota) | set(counts),
        key=lambda k: (
            sku_order.index(k[0]), chains[k[0]].level[k[1]], chains[k[0]].names[k[1]],
            k[2] != ANY_LINE, chains[k[0]].names[k[2]] if k[2] != ANY_LINE else "",
        ),
    )
    bad = bad_cells(topology, state)
    rows = []
    for key in keys:
        sku, tid, line = key
        chain = topology.chains[sku]
        used, borrowed, lent = counts.get(key, [0, 0, 0])
        guaranteed = state.quota.get(key, 0)
        rows.append(
            CellTypeStatus(
                cell_type=chain.names[tid],
                level=chain.level[tid],
                guaranteed=guaranteed,
                used=used,
                free=guaranteed - used - lent - bad.get(key, 0),
                bad=bad.get(key, 0),
                borrowed=borrowed,
                lent=lent,
                chain=chain.line_name(line),
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


def healthy_free_cells(chain: Chain) -> dict[int, list[int]]:
    """Per line, the free cells by type that only healthy nodes make up (a free cell
    with a bad node counts as its healthy parts)."""
    supply = {line: [0] * len(chain.names) for line in chain.line_roots}

    def healthy_parts(cell: Cell) -> None:
        if all(n.healthy for n in cell.nodes) if cell.node is None else cell.node.healthy:
            supply[cell.line][cell.tid] += 1
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
    return supply


def bad_cells(topology: Topology, state: VcState) -> dict[tuple[str, int, int], int]:
    """The VC's unbound guaranteed cells that healthy free cells cannot back, the VC
    taken on its own: each VC sees what the healthy cells could give it, not a share of
    everyone's shortfall. Entries naming a chain look only at that chain's cells."""
    out: dict[tuple[str, int, int], int] = {}
    for sku, chain in topology.chains.items():
        entries = [(tid, line) for tid, line in state.quota_entries(sku) if state.unbound(sku, tid, line) > 0]
        if not entries:
            continue
        supply = healthy_free_cells(chain)
        pooled = [0] * len(chain.names)
        bound: dict[int, list[int]] = {}
        for tid, line in entries:
            target = pooled if line == ANY_LINE else bound.setdefault(line, [0] * len(chain.names))
            target[tid] += state.unbound(sku, tid, line)
        for line in sorted(bound):
            short = chain.shortfall(supply.get(line) or [0] * len(chain.names), bound[line])
            for tid, n in enumerate(short):
                if n:
                    out[(sku, tid, line)] = n
                    bound[line][tid] -= n
        left = chain.pool_supply(supply, bound)
        assert left is not None  # the lines' demands were cut to what they can back
        for tid, n in enumerate(chain.shortfall(left, pooled)):
            if n:
                out[(sku, tid, ANY_LINE)] = n
    return out
