"""The physical cell model: chains of cell types, the cell tree with its buddy free
lists, devices on nodes, and the counts the placement search reads.

Every count the hot path needs is kept up to date by the few operations here
(``occupy``/``vacate`` devices, ``bind``/``unbind`` cells, node health), each touching
only the path from a cell to its root, so no decision walks the whole tree. Every
mutation pushes its inverse on ``Topology.undo`` so a tentative gang placement or a
preemption trial can be rolled back exactly.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .errors import ConfigurationError
from .spec import ClusterSpec, PhysicalCellSpec, SkuSpec, device_range

# Opportunistic pods prefer nodes in this order: already running opportunistic work
# only, then idle nodes no VC has bound, then bound nodes without guaranteed pods,
# then nodes with guaranteed pods.
OPP_WITH_OPP, OPP_IDLE_POOL, OPP_IDLE_BOUND, OPP_WITH_GUARANTEED = range(4)
# A quota entry that names no chain: its cells may come from any chain of the SKU.
ANY_LINE = -1


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building the cell tree or restoring
    placements: hundreds of thousands of long-lived objects and no garbage cycles, so
    its repeated full passes would only cost time (two thirds of the build at 4,000
    nodes). The previous setting is restored, whatever happens."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Binding:
    """A VC's virtual cell bound to a physical cell. ``owner`` is the VC whose quota it
    counts against, ``user`` the VC whose jobs run in it (they differ when borrowed);
    ``line`` is the chain named by the quota entry it counts against (the type id of
    the chain's top-level cells), or ``ANY_LINE`` for an entry that names none."""

    __slots__ = ("cell", "owner", "user", "usage", "pinned", "line")

    def __init__(self, cell: "Cell", owner: str, user: str, pinned: bool = False, line: int = -1) -> None:
        self.cell = cell
        self.owner = owner
        self.user = user
        self.usage = 0  # leaf cells used by the user's guaranteed pods
        self.pinned = pinned
        self.line = line

    @property
    def borrowed(self) -> bool:
        return self.owner != self.user


class Cell:
    __slots__ = (
        "id", "chain", "tid", "level", "cell_type", "address", "parent", "children",
        "up", "node", "nodes", "first", "leaves", "pinned_id", "has_pinned", "free",
        "free_children", "free_below", "idle", "binding", "line", "line_free",
    )

    def __init__(self, cid: int, chain: "Chain", tid: int, address: str, parent: "Cell | None") -> None:
        self.id = cid
        self.chain = chain
        self.tid = tid
        self.level = chain.level[tid]
        self.cell_type = chain.names[tid]
        self.address = address
        self.parent = parent
        # Leaf cells are most of the tree: they share empty containers, to keep memory
        # and the garbage collector's work small.
        self.children: list[Cell] | tuple[()] = [] if self.level > 1 else ()
        self.up: tuple[Cell, ...] = (self,) if parent is None else (self,) + parent.up  # self, then ancestors
        # The chain (in HiveD's sense) the cell belongs to: its top-level cell's type.
        if parent is None:
            self.line = tid
            self.line_free = chain.line_free.setdefault(tid, [0] * len(chain.names))
        else:
            self.line = parent.line
            self.line_free = parent.line_free
        self.node: Node | None = None  # for cells at or below the node level
        self.nodes: list[Node] | tuple[()] = [] if self.level >= chain.node_level else ()  # in index order
        self.first = 0  # first device index, for cells at or below the node level
        self.leaves = chain.leaves[tid]
        self.pinned_id: str | None = None
        self.has_pinned = False  # is or holds a pinned cell a VC owns
        self.free = False  # a maximal free cell of the buddy system
        self.free_children = 0
        self.free_below = [0] * len(chain.names)  # maximal free cells in the subtree, by type
        self.idle = 0  # idle leaf cells on healthy nodes in the subtree
        self.binding: Binding | None = None

    def __repr__(self) -> str:
        return f"Cell({self.address}, {self.cell_type})"


class Node:
    """The cells of one SKU on a host. ``name`` is the node-level cell's address: the
    host's name, or on a host carrying several SKUs the host and this SKU's device
    range (``h1/4-7``). Devices are indexed from 0 inside the engine; outside (placements,
    status) they are the host's indices, ``offset`` higher."""

    __slots__ = (
        "name", "index", "chain", "cell", "size", "leaf_cells", "jobs", "opp", "healthy",
        "free", "g_used", "o_used", "cover", "pinned", "bucket", "host", "offset",
    )

    def __init__(self, name: str, index: int, chain: "Chain", cell: Cell, host: str = "", offset: int = 0) -> None:
        self.name = name
        self.host = host or name
        self.offset = offset
        self.index = index
        self.chain = chain
        self.cell = cell
        self.size = cell.leaves
        self.leaf_cells: list[Cell] = []
        self.jobs: list[str | None] = [None] * self.size
        self.opp = bytearray(self.size)  # 1 where the device runs an opportunistic pod
        self.healthy = True
        self.free = self.size
        self.g_used = 0
        self.o_used = 0
        self.cover = 0  # bindings covering any part of the node
        self.pinned = False  # a pinned cell a VC owns covers the node or a part of it
        self.bucket: tuple[int, int] | None = None

    def host_devices(self, devices: tuple[int, ...]) -> tuple[int, ...]:
        """The host's indices of the node's ``devices``."""
        offset = self.offset
        return devices if not offset else tuple(d + offset for d in devices)

    def opp_category(self) -> int:
        if self.g_used:
            return OPP_WITH_GUARANTEED
        if self.cover or self.pinned:
            return OPP_IDLE_BOUND
        return OPP_WITH_OPP if self.o_used else OPP_IDLE_POOL


@dataclass
class Chain:
    """The cell types of one SKU, identified by index (``tid``). Below and at the node
    level they form a line down to the leaf (level 1); above it several types may share
    a child (racks of different sizes), so the types form a tree rooted at the leaf.

    The top-level cells of one type, with everything inside them, are what HiveD calls
    a chain; here a *line* (keyed by that top-level type's id), since ``Chain`` is the
    whole SKU. A gang stays inside one line; a quota entry may name the line its cells
    come from."""

    sku: SkuSpec
    names: list[str]
    level: list[int]
    leaves: list[int]
    child: list[int]  # child type, -1 for the leaf
    child_count: list[int]
    node_type: int
    order: list[int] = field(default_factory=list)  # types from the top down
    roots: list[Cell] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    free_count: list[int] = field(default_factory=list)  # maximal free cells, by type
    demand: list[int] = field(default_factory=list)  # unbound cells of entries naming no line, by type
    # Per line: maximal free cells by type, and the unbound cells of entries naming it.
    line_free: dict[int, list[int]] = field(default_factory=dict)
    line_demand: dict[int, list[int]] = field(default_factory=dict)
    line_roots: dict[int, list[Cell]] = field(default_factory=dict)
    bound_demand = 0  # sum of every line_demand: 0 lets the safety check skip the lines
    buckets: list[list[set[int]]] = field(default_factory=list)  # [category][free] -> node indices
    # The bindings each VC uses that still have idle healthy devices, so that placing a
    # pod looks only where there is room.
    roomy: dict[str, set[Binding]] = field(default_factory=dict)
    entry_names: dict[tuple[int, int], str] = field(default_factory=dict)  # quota entries as VCs spell them

    def __post_init__(self) -> None:
        n = len(self.names)
        self.order = sorted(range(n), key=lambda t: (-self.level[t], self.names[t]))
        self.free_count = [0] * n
        self.demand = [0] * n
        self.buckets = [[set() for _ in range(self.node_size + 1)] for _ in range(4)]
        # Types a cell of each type can be carved out of, smallest first.
        self.ancestors: list[list[int]] = [[] for _ in range(n)]
        for t in range(n):
            for a in range(n):
                c = self.child[a]
                while c != -1 and c != t:
                    c = self.child[c]
                if c == t:
                    self.ancestors[t].append(a)
            self.ancestors[t].sort(key=lambda a: (self.level[a], self.leaves[a], self.names[a]))

    @property
    def node_level(self) -> int:
        return self.level[self.node_type]

    @property
    def top_level(self) -> int:
        return max(self.level)

    @property
    def node_size(self) -> int:
        return self.leaves[self.node_type]

    def tid(self, cell_type: str) -> int:
        return self.names.index(cell_type)

    def lines(self) -> list[int]:
        """The lines that have cells, by top-level type name."""
        return sorted(self.line_roots, key=lambda t: self.names[t])

    def line_types(self, line: int) -> list[int]:
        """A line's types from its top-level type down to the leaf."""
        types = [line]
        while self.child[types[-1]] != -1:
            types.append(self.child[types[-1]])
        return types

    def in_line(self, tid: int, line: int) -> bool:
        return line == ANY_LINE or tid in self.line_types(line)

    def line_name(self, line: int) -> str | None:
        return None if line == ANY_LINE else self.names[line]

    def is_safe(self) -> bool:
        """The safety invariant: each line backs the unbound cells of the entries naming
        it, and what is left everywhere backs those of the entries naming none."""
        if not self.bound_demand:
            supply = self.free_count
        else:
            supply = self.pool_supply(self.line_free, self.line_demand)
            if supply is None:
                return False
        carry = [0] * len(self.names)
        demand = self.demand
        for t in self.order:
            avail = carry[t] + supply[t]
            if avail < demand[t]:
                return False
            if self.child[t] != -1:
                carry[self.child[t]] += (avail - demand[t]) * self.child_count[t]
        return True

    def pool_supply(self, line_free: dict[int, list[int]], line_demand: dict[int, list[int]]) -> list[int] | None:
        """Free cells by type once each line has kept what the entries naming it need
        (``None`` if some line cannot): a line keeps, at each level, only the cells its
        own demand there and below needs; the rest of its free cells serve everyone.

        Below a type two lines share, their types coincide, so spare cells of either
        serve entries naming no line alike: keeping the least per line is exact."""
        supply = list(self.free_count) if line_free is self.line_free else self._sum_free(line_free)
        for line in sorted(line_demand):
            demand = line_demand[line]
            if not any(demand):
                continue
            free = line_free.get(line) or [0] * len(self.names)
            types = self.line_types(line)
            # needs[i]: cells of types[i] the line must keep for its demand below it.
            needs = [0] * len(types)
            for i in range(len(types) - 1, 0, -1):
                t = types[i]
                short = demand[t] + needs[i] - free[t]
                needs[i - 1] = -(-short // self.child_count[types[i - 1]]) if short > 0 else 0
            if demand[types[0]] + needs[0] > free[types[0]]:
                return None
            carry = 0
            for i, t in enumerate(types):
                avail = carry + free[t]
                supply[t] += avail - demand[t] - needs[i] - free[t]
                carry = needs[i] * self.child_count[t]
        return supply

    def _sum_free(self, line_free: dict[int, list[int]]) -> list[int]:
        total = [0] * len(self.names)
        for free in line_free.values():
            for t, n in enumerate(free):
                total[t] += n
        return total

    def shortfall(self, supply: list[int], demand: list[int]) -> list[int]:
        """Per type, how many of ``demand``'s cells ``supply`` cannot back."""
        short = [0] * len(self.names)
        carry = [0] * len(self.names)
        for t in self.order:
            avail = carry[t] + supply[t]
            short[t] = max(0, demand[t] - avail)
            if self.child[t] != -1:
                carry[self.child[t]] += max(0, avail - demand[t]) * self.child_count[t]
        return short


def _used_types(spec: ClusterSpec, types: dict) -> set[str]:
    """Cell types some physical cell is, or holds."""
    used: set[str] = set()
    stack = list(spec.physical_cells)
    while stack:
        cell = stack.pop()
        stack.extend(cell.children)
        name = cell.cell_type
        while name in types and name not in used:
            used.add(name)
            name = types[name].child
    return used


def build_chains(spec: ClusterSpec, warnings: list[str] | None = None) -> dict[str, Chain]:
    """Resolve cell types into one chain per SKU, refusing inconsistent type graphs.

    A type no physical cell uses that fits no chain (say an old ``G-HALF = 8 × G`` left
    over after the node became ``16 × G``) is ignored, with a line in ``warnings``: the
    control plane passes every type stored for the cluster."""
    warnings = warnings if warnings is not None else []
    skus = {}
    for sku in spec.skus:
        if sku.name in skus:
            raise ConfigurationError(f"SKU {sku.name!r} is defined twice")
        if sku.gpu < 0 or sku.cpu < 0 or sku.memory_mb < 0:
            raise ConfigurationError(f"SKU {sku.name!r} has a negative resource")
        skus[sku.name] = sku
    types = {}
    for ct in spec.cell_types:
        if ct.name in types or ct.name in skus:
            raise ConfigurationError(f"cell type {ct.name!r} is defined twice")
        if ct.child_count < 1:
            raise ConfigurationError(f"cell type {ct.name!r} needs child_count >= 1")
        if ct.child not in types and ct.child not in skus and ct.child not in {c.name for c in spec.cell_types}:
            raise ConfigurationError(f"cell type {ct.name!r} has unknown child type {ct.child!r}")
        types[ct.name] = ct
    leaf_of: dict[str, str] = {}
    for name in sorted(types):
        seen = [name]
        while seen[-1] in types:
            seen.append(types[seen[-1]].child)
            if len(seen) > len(types) + 1:
                raise ConfigurationError(f"cell types below {name!r} form a cycle")
        leaf_of[name] = seen[-1]
    used = _used_types(spec, types)
    chains: dict[str, Chain] = {}
    for sku in spec.skus:
        names = [sku.name] + sorted(n for n in types if leaf_of[n] == sku.name)
        nodes = [n for n in names[1:] if types[n].is_node]
        used_nodes = [n for n in nodes if n in used]
        if len(used_nodes) > 1:
            raise ConfigurationError(
                f"chain {sku.name} needs exactly one node-level cell type, its cells use {len(used_nodes)}: "
                f"{', '.join(used_nodes)}",
                chain=sku.name,
            )
        if used_nodes or len(nodes) == 1:
            node = (used_nodes or nodes)[0]
        else:
            if nodes or names[1:]:
                warnings.append(
                    f"SKU {sku.name} is ignored: no physical cell uses it and it has "
                    f"{len(nodes)} node-level cell types instead of one"
                )
            continue
        below_node = [node]
        while below_node[-1] in types:
            below_node.append(types[below_node[-1]].child)
        kept = [sku.name]
        for n in names[1:]:
            if n != node and types[n].is_node:
                warnings.append(
                    f"cell type {n!r} is ignored: it is marked node-level, but {node!r} is the node type of SKU "
                    f"{sku.name} and no physical cell uses {n!r}"
                )
                continue
            c = n
            while c in types and c != node:
                c = types[c].child
            if n in below_node or c == node:
                kept.append(n)
                continue
            if n in used:
                raise ConfigurationError(
                    f"cell type {n!r} of chain {sku.name} is neither above nor inside the node type {node!r}",
                    cell_type=n,
                    chain=sku.name,
                )
            warnings.append(
                f"cell type {n!r} is ignored: it is neither above nor inside the node type {node!r} of SKU "
                f"{sku.name}, and no physical cell uses it"
            )
        names = kept
        level = {sku.name: 1}

        def level_of(n: str) -> int:
            if n not in level:
                level[n] = level_of(types[n].child) + 1
            return level[n]

        leaves = {sku.name: 1}

        def leaves_of(n: str) -> int:
            if n not in leaves:
                leaves[n] = leaves_of(types[n].child) * types[n].child_count
            return leaves[n]

        chains[sku.name] = Chain(
            sku=sku,
            names=names,
            level=[level_of(n) for n in names],
            leaves=[leaves_of(n) for n in names],
            child=[-1] + [names.index(types[n].child) for n in names[1:]],
            child_count=[1] + [types[n].child_count for n in names[1:]],
            node_type=names.index(node),
        )
    return chains


class Topology:
    """All physical cells of the cluster and the operations that change their state."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.warnings: list[str] = []
        self.chains = build_chains(spec, self.warnings)
        self.chain_of_type: dict[str, Chain] = {}
        for chain in self.chains.values():
            for name in chain.names:
                self.chain_of_type[name] = chain
        self.cells: list[Cell] = []
        self.by_address: dict[str, Cell] = {}
        self.nodes: dict[str, Node] = {}
        # Hosts carrying nodes named by a device range (``h1/4-7``), with all their nodes
        # by first device: placements name the host, and host device indices.
        self.hosts: dict[str, list[Node]] = {}
        self.pinned: dict[str, Cell] = {}
        self.pinned_inside_nodes = False  # some pinned cell lies below the node level
        self._by_host: dict[str, list[Node]] = {}
        self.undo: list[Callable[[], None]] = []
        self.unhealthy: dict[str, Node] = {}
        for pspec in spec.physical_cells:
            chain = self.chain_of_type.get(pspec.cell_type)
            if chain is None:
                raise ConfigurationError(f"physical cell {pspec.address!r} has unknown cell type {pspec.cell_type!r}")
            tid = chain.tid(pspec.cell_type)
            if chain.level[tid] < chain.node_level:
                raise ConfigurationError(
                    f"physical cell {pspec.address!r} is below the node level: list it under its node "
                    f"(a {chain.names[chain.node_type]})",
                    cell_type=pspec.cell_type,
                )
            root = self._build(pspec, chain, tid, None)
            chain.roots.append(root)
            chain.line_roots.setdefault(root.tid, []).append(root)
        self.hosts = {host: nodes for host, nodes in self._by_host.items() if any(n.name != host for n in nodes)}
        for nodes in self.hosts.values():
            nodes.sort(key=lambda n: n.offset)
        del self._by_host

    def _claim(self, node: Node) -> None:
        """A host's nodes (one per SKU) hold disjoint device ranges."""
        nodes = self._by_host.setdefault(node.host, [])
        for other in nodes:
            a, b = sorted((other, node), key=lambda n: (n.offset, n is node))
            if b.offset < a.offset + a.size:
                raise ConfigurationError(
                    f"nodes {a.name!r} ({a.chain.sku.name}, devices {a.offset}-{a.offset + a.size - 1}) and "
                    f"{b.name!r} ({b.chain.sku.name}, devices {b.offset}-{b.offset + b.size - 1}) of host "
                    f"{node.host!r} share devices: each SKU of a host needs its own device range"
                )
        nodes.append(node)

    def locate(self, host: str, devices: tuple[int, ...]) -> tuple[Node | None, tuple[int, ...]]:
        """The node of a placement's ``host`` holding its first device, and the devices
        as the node's own indices (``None`` when the host is unknown)."""
        nodes = self.hosts.get(host) if self.hosts else None
        if nodes is None:
            return self.nodes.get(host), devices
        first = devices[0] if devices else 0
        for node in nodes:
            if node.offset <= first < node.offset + node.size:
                return node, tuple(d - node.offset for d in devices)
        return None, devices

    def nodes_of(self, name: str) -> list[Node]:
        """The nodes a name given from outside means: every node of a host, or the node
        of that address."""
        nodes = self.hosts.get(name) if self.hosts else None
        if nodes is not None:
            return nodes
        node = self.nodes.get(name)
        if node is None:
            raise ValueError(f"unknown node {name!r}")
        return [node]

    # --- construction ---------------------------------------------------------

    def _register(self, cell: Cell) -> None:
        if cell.address in self.by_address:
            raise ConfigurationError(f"cell address {cell.address!r} is used twice")
        self.by_address[cell.address] = cell
        self.cells.append(cell)

    def _build(self, pspec: PhysicalCellSpec, chain: Chain, tid: int, parent: Cell | None) -> Cell:
        if pspec.cell_type != chain.names[tid]:
            raise ConfigurationError(
                f"physical cell {pspec.address!r} is a {pspec.cell_type!r} but sits where a "
                f"{chain.names[tid]!r} belongs"
            )
        cell = Cell(len(self.cells), chain, tid, pspec.address, parent)
        self._register(cell)
        if pspec.pinned_id is not None:
            if pspec.pinned_id in self.pinned:
                raise ConfigurationError(f"pinned cell id {pspec.pinned_id!r} is used twice")
            cell.pinned_id = pspec.pinned_id
            self.pinned[pspec.pinned_id] = cell
        if tid == chain.node_type:
            try:
                host, first, last = device_range(pspec.address)
            except ValueError as e:
                raise ConfigurationError(f"node {e}", cell_type=pspec.cell_type) from None
            if last is not None and last - first + 1 != cell.leaves:
                raise ConfigurationError(
                    f"node {pspec.address!r} names {last - first + 1} devices of host {host!r}, a "
                    f"{pspec.cell_type} has {cell.leaves}",
                    cell_type=pspec.cell_type,
                )
            node = Node(pspec.address, len(chain.nodes), chain, cell, host, first)
            if pspec.address in self.nodes:
                raise ConfigurationError(f"node {pspec.address!r} is defined twice")
            self._claim(node)
            self.nodes[pspec.address] = node
            chain.nodes.append(node)
            self._build_inside_node(cell, node)
            cell.nodes = [node]
            for child_spec in pspec.children:
                self._name_inside_node(child_spec, cell)
        else:
            if len(pspec.children) != chain.child_count[tid]:
                raise ConfigurationError(
                    f"physical cell {pspec.address!r} ({pspec.cell_type}) needs "
                    f"{chain.child_count[tid]} children, has {len(pspec.children)}"
                )
            for child_spec in pspec.children:
                child = self._build(child_spec, chain, chain.child[tid], cell)
                cell.children.append(child)
                cell.nodes.extend(child.nodes)
        cell.idle = cell.leaves
        return cell

    def _build_inside_node(self, cell: Cell, node: Node) -> None:
        cell.node = node
        if cell.level == 1:
            node.leaf_cells.append(cell)
            return
        child_tid = cell.chain.child[cell.tid]
        size = cell.chain.leaves[child_tid]
        base = node.offset
        for i in range(cell.chain.child_count[cell.tid]):
            first = cell.first + i * size
            at = base + first
            address = f"{node.host}/{at}" if size == 1 else f"{node.host}/{at}-{at + size - 1}"
            child = Cell(len(self.cells), cell.chain, child_tid, address, cell)
            child.first = first
            child.idle = size
            self._register(child)
            cell.children.append(child)
            self._build_inside_node(child, node)

    def _name_inside_node(self, pspec: PhysicalCellSpec, parent: Cell) -> None:
        """A cell below the node level listed in the configuration (to pin it): one of
        the cells its parent holds, by address and type."""
        cell = next((c for c in parent.children if c.address == pspec.address), None)
        if cell is None:
            kind = parent.chain.names[parent.chain.child[parent.tid]] if parent.children else None
            held = ", ".join(c.address for c in parent.children)
            raise ConfigurationError(
                f"physical cell {pspec.address!r} is no cell of {parent.address!r}"
                + (f": its {kind} cells are {held}" if kind else f": a {parent.cell_type} has no cells inside"),
                cell_type=pspec.cell_type,
            )
        if pspec.cell_type != cell.cell_type:
            raise ConfigurationError(
                f"physical cell {pspec.address!r} is a {pspec.cell_type!r} but sits where a "
                f"{cell.cell_type!r} belongs",
                cell_type=pspec.cell_type,
            )
        if pspec.pinned_id is not None:
            if pspec.pinned_id in self.pinned:
                raise ConfigurationError(f"pinned cell id {pspec.pinned_id!r} is used twice")
            cell.pinned_id = pspec.pinned_id
            self.pinned[pspec.pinned_id] = cell
            self.pinned_inside_nodes = True
        for child_spec in pspec.children:
            self._name_inside_node(child_spec, cell)

    def init_free(self, pinned_owner: dict[str, str]) -> None:
        """Start with every cell free except pinned cells owned by a VC (a pinned id no
        VC owns is an ordinary cell)."""
        for chain in self.chains.values():
            for root in chain.roots:
                self._mark_pinned(root, pinned_owner)
                self._init_free(root, pinned_owner)
            for node in chain.nodes:
                self.rebucket(node)

    def _mark_pinned(self, cell: Cell, pinned_owner: dict[str, str]) -> bool:
        # Below the node level only when some pinned cell is there (most clusters: none).
        inside = (cell.level > cell.chain.node_level or self.pinned_inside_nodes) and any(
            [self._mark_pinned(child, pinned_owner) for child in cell.children]
        )
        cell.has_pinned = cell.pinned_id in pinned_owner or inside
        return cell.has_pinned

    def _init_free(self, cell: Cell, pinned_owner: dict[str, str]) -> None:
        owner = pinned_owner.get(cell.pinned_id) if cell.pinned_id else None
        if owner is not None:
            cell.binding = Binding(cell, owner, owner, pinned=True)
            for node in cell.nodes or (cell.node,):
                node.pinned = True
        elif cell.has_pinned:
            for child in cell.children:
                self._init_free(child, pinned_owner)
        else:
            self._set_free(cell, True)

    # --- transactions -----------------------------------------------------------

    def mark(self) -> int:
        return len(self.undo)

    def rollback(self, mark: int) -> None:
        undo = self.undo
        while len(undo) > mark:
            undo.pop()()

    def commit(self) -> None:
        self.undo.clear()

    # --- buddy free lists -----------------------------------------------------

    def _set_free(self, cell: Cell, flag: bool) -> None:
        cell.free = flag
        d = 1 if flag else -1
        tid = cell.tid
        cell.chain.free_count[tid] += d
        cell.line_free[tid] += d
        for c in cell.up:
            c.free_below[tid] += d
        if cell.parent is not None:
            cell.parent.free_children += d

    def bind(self, cell: Cell, binding: Binding) -> None:
        """Bind a free cell (or a cell inside a free one, splitting it buddy-style)."""
        top = cell
        path = []
        while not top.free:
            path.append(top)
            top = top.parent
            assert top is not None, "bind() needs a free cell or a cell inside one"
        self._set_free(top, False)
        parent = top
        for child_on_path in reversed(path):
            for sibling in parent.children:
                if sibling is not child_on_path:
                    self._set_free(sibling, True)
            parent = child_on_path
        cell.binding = binding
        self._cover(cell, 1)
        self._update_room(cell.node or cell.nodes[0], cell.first)
        self.undo.append(lambda: self._undo_bind(cell))

    def _undo_bind(self, cell: Cell) -> None:
        cell.chain.roomy.get(cell.binding.user, set()).discard(cell.binding)
        cell.binding = None
        self._cover(cell, -1)
        self._release_to_pool(cell)

    def unbind(self, cell: Cell) -> None:
        binding = cell.binding
        assert binding is not None
        cell.chain.roomy.get(binding.user, set()).discard(binding)
        cell.binding = None
        self._cover(cell, -1)
        self._release_to_pool(cell)
        self.undo.append(lambda: self.bind(cell, binding) or self.undo.pop())

    def _release_to_pool(self, cell: Cell) -> None:
        self._set_free(cell, True)
        while cell.parent is not None and cell.parent.free_children == len(cell.parent.children):
            for sibling in cell.parent.children:
                self._set_free(sibling, False)
            cell = cell.parent
            self._set_free(cell, True)

    def _cover(self, cell: Cell, d: int) -> None:
        if cell.node is not None:
            cell.node.cover += d
            self.rebucket(cell.node)
        else:
            for node in cell.nodes:
                node.cover += d
                self.rebucket(node)

    # --- devices --------------------------------------------------------------

    def occupy(self, node: Node, devices: tuple[int, ...], job_id: str, opportunistic: bool) -> None:
        for d in devices:
            node.jobs[d] = job_id
            node.opp[d] = opportunistic
            if node.healthy:
                for c in node.leaf_cells[d].up:
                    c.idle -= 1
        self._update_rooms(node, devices)
        n = len(devices)
        node.free -= n
        if opportunistic:
            node.o_used += n
        else:
            node.g_used += n
        self.rebucket(node)
        self.undo.append(lambda: self._vacate(node, devices, opportunistic))

    def vacate(self, node: Node, devices: tuple[int, ...]) -> None:
        job_id = node.jobs[devices[0]]
        opportunistic = node.opp[devices[0]]
        self._vacate(node, devices, opportunistic)
        self.undo.append(lambda: self.occupy(node, devices, job_id, opportunistic) or self.undo.pop())

    def _vacate(self, node: Node, devices: tuple[int, ...], opportunistic: bool) -> None:
        for d in devices:
            node.jobs[d] = None
            node.opp[d] = False
            if node.healthy:
                for c in node.leaf_cells[d].up:
                    c.idle += 1
        self._update_rooms(node, devices)
        n = len(devices)
        node.free += n
        if opportunistic:
            node.o_used -= n
        else:
            node.g_used -= n
        self.rebucket(node)

    def set_opportunistic(self, node: Node, devices: tuple[int, ...], opportunistic: bool) -> None:
        """Switch devices between guaranteed and opportunistic use (lazy preemption)."""
        previous = node.opp[devices[0]]
        if previous == opportunistic:
            return
        for d in devices:
            node.opp[d] = opportunistic
        n = len(devices) if opportunistic else -len(devices)
        node.o_used += n
        node.g_used -= n
        self.rebucket(node)
        self.undo.append(lambda: self.set_opportunistic(node, devices, previous) or self.undo.pop())

    def set_health(self, node: Node, healthy: bool) -> None:
        if node.healthy == healthy:
            return
        d = 1 if healthy else -1
        for i, job in enumerate(node.jobs):
            if job is None:
                for c in node.leaf_cells[i].up:
                    c.idle += d
                self._update_room(node, i)
        node.healthy = healthy
        if healthy:
            del self.unhealthy[node.name]
        else:
            self.unhealthy[node.name] = node
        self.rebucket(node)

    def rebucket(self, node: Node) -> None:
        """Keep the node in the opportunistic search bucket matching its state."""
        key = None
        if node.healthy and node.free:
            key = (node.opp_category(), node.free)
        if key == node.bucket:
            return
        buckets = node.chain.buckets
        if node.bucket is not None:
            buckets[node.bucket[0]][node.bucket[1]].discard(node.index)
        if key is not None:
            buckets[key[0]][key[1]].add(node.index)
        node.bucket = key

    def _update_room(self, node: Node, device: int) -> Cell | None:
        """File the binding holding ``device``, if any, by whether it has idle room;
        return its cell."""
        for c in node.leaf_cells[device].up:
            binding = c.binding
            if binding is not None:
                roomy = node.chain.roomy.setdefault(binding.user, set())
                if c.idle > 0:
                    roomy.add(binding)
                else:
                    roomy.discard(binding)
                return c
        return None

    def _update_rooms(self, node: Node, devices: tuple[int, ...]) -> None:
        """``_update_room`` for every binding holding some of ``devices`` (a pod may span
        several cells bound inside a node: each must be filed, not only the first)."""
        filed = None
        for d in devices:
            if filed is not None and (filed.node is None or filed.first <= d < filed.first + filed.leaves):
                continue
            filed = self._update_room(node, d)

    # --- queries ----------------------------------------------------------------

    def smallest_cell_holding(self, node: Node, devices: tuple[int, ...]) -> Cell:
        cells = [node.leaf_cells[d] for d in devices]
        cell = cells[0]
        for other in cells[1:]:
            while not (cell.first <= other.first < cell.first + cell.leaves):
                cell = cell.parent
        return cell

    @staticmethod
    def chain_addresses(cell: Cell) -> tuple[str, ...]:
        return tuple(c.address for c in reversed(cell.up))
