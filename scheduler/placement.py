"""Topology-aware gang placement.

A guaranteed pod runs inside one of its VC's virtual cells: first in a cell already
bound to the VC, else in a newly bound one (buddy allocation: a free cell of the
smallest quota cell type that fits, else a split of the smallest free ancestor), never
breaking the safety invariant. A VC's new cell is looked for first inside the top-level
cell holding most of its cells, or, for its first cells, a free top-level cell of just
that type, else the top-level cell with the most idle leaves: a VC's cells stay
together, so its gangs fit (and preempt) within few of them. When binding the cell found
would break the safety invariant, the search goes on elsewhere, skipping only the free
cells of that line and type (binding any of them would break it alike). A gang's pods of
one SKU stay inside one chain (the top-level cells of one type): the first pod picks it,
and if the rest do not fit there every other chain is tried in turn. An opportunistic
pod runs on idle devices anywhere, pinned cells included, which count as cells bound to
a VC (as in HiveD; their owner preempts it when it needs them). Pods are placed largest
first; later pods prefer the nodes the gang already uses, then nodes with the lowest
common ancestor, then the tightest fit (partly used nodes first, so whole nodes stay
whole). Inside a node the devices come from the smallest cell that holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .cells import ANY_LINE, OPP_IDLE_POOL, OPP_WITH_OPP, Binding, Cell, Chain, Node, Topology
from .ledger import Ledger, RunningJob, RunningPod
from .quota import VcState

Blocked = Mapping[int, frozenset[int]]  # node cell id -> device indices reserved for another gang
NO_BLOCK: Blocked = {}


@dataclass(frozen=True)
class PodNeed:
    task_role: str
    index: int
    sku: str
    leaf_cells: int
    pinned_cell: str | None = None


@dataclass(frozen=True)
class Shortage:
    """Why a gang did not fit: the chain and the first pod that found no place."""

    sku: str
    leaf_cells: int
    pinned_cell: str | None = None


def _unblocked_idle(node: Node, cell: Cell, blocked: Blocked) -> int:
    """Idle devices of ``cell`` (the node or a cell inside it) this gang may take."""
    if not node.healthy:
        return 0
    reserved = blocked.get(node.cell.id)
    if not reserved:
        return cell.idle
    end = cell.first + cell.leaves
    return cell.idle - sum(1 for d in reserved if cell.first <= d < end and node.jobs[d] is None)


def _is_region(cell: Cell, room: int) -> bool:
    """Whether ``cell`` is the smallest cell above a node that holds ``room`` leaves
    (or a top-level cell when none does)."""
    if cell.level <= cell.chain.node_level or (cell.leaves < room and cell.parent is not None):
        return False
    return cell.children[0].level == cell.chain.node_level or cell.children[0].leaves < room


def _region_short(node_cell: Cell, room: int) -> bool:
    """Whether the region around a node has fewer than ``room`` idle leaves."""
    for a in node_cell.up[1:]:
        if _is_region(a, room):
            return a.idle < room
    return False


def _lca_level(anchor: Cell | None, node: Node) -> int:
    if anchor is None:
        return 0
    ups = node.cell.up
    for a in anchor.up:
        if a in ups:
            return a.level
    return anchor.chain.top_level + 1


class Placer:
    def __init__(self, topology: Topology, ledger: Ledger) -> None:
        self.topology = topology
        self.ledger = ledger

    # --- devices inside a node --------------------------------------------------

    def pick_devices(self, node: Node, within: Cell, k: int, blocked: Blocked) -> tuple[int, ...]:
        cell = within if within.level <= node.chain.node_level else node.cell
        while cell.level > 1:
            fitting = [c for c in cell.children if _unblocked_idle(node, c, blocked) >= k]
            if not fitting:
                break
            cell = min(fitting, key=lambda c: (_unblocked_idle(node, c, blocked), c.first))
        reserved = blocked.get(node.cell.id, frozenset())
        jobs = node.jobs
        picked = [d for d in range(cell.first, cell.first + cell.leaves) if jobs[d] is None and d not in reserved]
        return tuple(picked[:k])

    # --- guaranteed pods ----------------------------------------------------------

    def _best_in_bindings(
        self, vc: VcState, chain: Chain, need: PodNeed, want: int, room: int, gang: list[Node],
        anchor: Cell | None, blocked: Blocked, line: int, scope: Cell | None,
    ) -> tuple[Node, Binding] | None:
        k = need.leaf_cells
        if need.pinned_cell is not None:
            candidates = [vc.pinned[need.pinned_cell]]
        else:
            candidates = chain.roomy.get(vc.name, ())
        best = None
        best_key = None
        node_level = chain.node_level
        for b in candidates:
            if b.pinned and need.pinned_cell is None:
                continue
            cell = b.cell
            if cell.idle < k or (line != ANY_LINE and cell.line != line and need.pinned_cell is None):
                continue
            nodes = (cell.node,) if cell.level <= node_level else cell.nodes
            for node in nodes:
                if not node.healthy or (scope is not None and scope not in node.cell.up):
                    continue
                free = _unblocked_idle(node, cell if cell.level <= node_level else node.cell, blocked)
                if free < k:
                    continue
                key = (
                    node not in gang,
                    _lca_level(anchor, node),
                    room > 0 and _region_short(node.cell, room),
                    free < want,
                    b.borrowed,
                    free - k,
                    node.index,
                    cell.id,
                )
                if best_key is None or key < best_key:
                    best, best_key = (node, b), key
        return best

    def _usable(self, cell: Cell, k: int, blocked: Blocked, scope: Cell | None = None) -> bool:
        if cell.idle < k:
            return False
        if cell.node is not None:
            return not blocked or _unblocked_idle(cell.node, cell, blocked) >= k
        return any(
            n.healthy and _unblocked_idle(n, n.cell, blocked) >= k and (scope is None or scope in n.cell.up)
            for n in cell.nodes
        )

    def _search_free(
        self, chain: Chain, tid: int, k: int, anchor: Cell | None, blocked: Blocked, clean: bool, room: int,
        roots: list[Cell],
    ) -> Cell | None:
        floor = max(k, chain.leaves[tid]) if clean else k

        def dfs(cell: Cell, skip: Cell | None) -> Cell | None:
            if cell.free_below[tid] == 0 or cell.idle < floor:
                return None
            if room and cell.idle < room and _is_region(cell, room):
                return None
            if cell.tid == tid:
                if cell.free and (not clean or cell.idle == cell.leaves) and self._usable(cell, k, blocked):
                    return cell
                return None
            for child in cell.children:
                if child is not skip:
                    found = dfs(child, None)
                    if found is not None:
                        return found
            return None

        previous = None
        if anchor is not None and anchor.up[-1] in roots:
            for a in anchor.up:
                found = dfs(a, previous)
                if found is not None:
                    return found
                previous = a
        for root in roots:
            if previous is not None and root is previous:
                continue
            found = dfs(root, None)
            if found is not None:
                return found
        return None

    def _descend(self, cell: Cell, tid: int, k: int, blocked: Blocked) -> Cell | None:
        while cell.tid != tid:
            fitting = [c for c in cell.children if self._usable(c, k, blocked)]
            if not fitting:
                return None
            cell = min(fitting, key=lambda c: (c.idle != c.leaves, c.id))
        return cell

    def find_free_cell(
        self, chain: Chain, tid: int, k: int, anchor: Cell | None, blocked: Blocked, room: int = 0,
        line: int = ANY_LINE, scope: Cell | None = None, avoid: frozenset[tuple[int, int]] | set = frozenset(),
    ) -> Cell | None:
        """A free cell of type ``tid`` with ``k`` usable devices on one node, or one carved
        out of the smallest free ancestor; cells without any running pod first. With
        ``room`` (the first pod of a multi-pod gang), first only inside a region with
        that many idle leaves, so the rest of the gang can follow close by. ``line``
        keeps to one chain, ``scope`` to the nodes inside one cell; ``avoid``: the free
        cells not to take or split, as (line, type) pairs (see ``free_source``)."""
        if scope is not None:
            return self._free_cell_in_scope(chain, tid, k, blocked, scope, avoid)
        if line == ANY_LINE:
            roots, free_count = chain.roots, chain.free_count
        else:
            roots, free_count = chain.line_roots.get(line, []), chain.line_free.get(line) or chain.free_count
        for region_room in (room, 0) if room else (0,):
            for clean in (True, False):
                for m in [tid] + chain.ancestors[tid]:
                    if free_count[m] == 0:
                        continue
                    usable = [r for r in roots if (r.line, m) not in avoid] if avoid else roots
                    found = self._search_free(chain, m, k, anchor, blocked, clean, region_room, usable)
                    if found is not None:
                        return self._descend(found, tid, k, blocked) if m != tid else found
        return None

    def _free_cell_in_scope(
        self, chain: Chain, tid: int, k: int, blocked: Blocked, scope: Cell,
        avoid: frozenset[tuple[int, int]] | set = frozenset(),
    ) -> Cell | None:
        """A cell of type ``tid`` that is free (or inside a free cell) and holds or lies
        inside ``scope``, with ``k`` usable devices on a node of the scope."""
        if chain.level[tid] >= scope.level:
            cell = next((a for a in scope.up if a.tid == tid), None)
            if cell is None or cell.has_pinned or not any(a.free for a in cell.up) or free_source(cell) in avoid:
                return None
            return cell if self._usable(cell, k, blocked, scope) else None
        if any(a.free for a in scope.up):
            if free_source(scope) in avoid:
                return None
            return self._descend(scope, tid, k, blocked) if self._usable(scope, k, blocked) else None
        for clean in (True, False):
            for m in [tid] + chain.ancestors[tid]:
                if chain.level[m] > scope.level or scope.free_below[m] == 0 or (scope.line, m) in avoid:
                    continue
                found = self._search_free(chain, m, k, None, blocked, clean, 0, [scope])
                if found is not None:
                    return self._descend(found, tid, k, blocked) if m != tid else found
        return None

    def _bind_new(
        self, vc: VcState, chain: Chain, k: int, anchor: Cell | None, lenders: list[VcState] | None,
        blocked: Blocked, room: int, line: int, scope: Cell | None,
    ) -> Binding | None:
        """Bind a new virtual cell of ``vc`` (or, with ``lenders``, of a lender) for ``k``
        devices, in ``line`` if the gang already has one, keeping the safety invariant."""
        sku = chain.sku.name
        options: list[tuple[int, int, bool, int, int, str, VcState]] = []  # size, type, any line, line, -unbound, owner
        owners = [vc] if lenders is None else lenders
        limit = vc.spec.borrowing_limit
        for owner in owners:
            for tid, entry_line in owner.quota_entries(sku):
                size = chain.leaves[tid]
                if size < k or owner.unbound(sku, tid, entry_line) <= 0:
                    continue
                if line != ANY_LINE and entry_line not in (ANY_LINE, line):
                    continue
                if lenders is not None:
                    if limit is not None and vc.total_borrowed() + size > limit:
                        continue
                    lend = owner.spec.lending_limit
                    if lend is not None and owner.total_lent() + size > lend:
                        continue
                unbound = 0 if lenders is None else -owner.unbound(sku, tid, entry_line)
                options.append((size, tid, entry_line == ANY_LINE, entry_line, unbound, owner.name, owner))
        options.sort(key=lambda o: o[:6])
        tried: set[tuple[int, int]] = set()
        for _, tid, _, entry_line, _, _, owner in options:
            # Any owner of the same entry needs the same kind of free cell and leaves the
            # same free counts behind, so one attempt per entry decides for all.
            if (tid, entry_line) in tried:
                continue
            tried.add((tid, entry_line))
            search_line = entry_line if entry_line != ANY_LINE else line
            home = None
            if anchor is None and scope is None and lenders is None:
                home = self._home(owner, chain, tid, search_line)
            # Whether binding a cell keeps the safety invariant depends only on the free
            # cell it is taken from or carved out of, by its line and type: when one
            # breaks it, every free cell of that line and type would, and the search
            # goes on among the others (the VC's home first, then anywhere).
            avoid: set[tuple[int, int]] = set()
            while True:
                cell = None
                if home is not None:
                    cell = self.find_free_cell(chain, tid, k, None, blocked, room, search_line, home, avoid)
                    if cell is None:
                        home = None
                if cell is None:
                    cell = self.find_free_cell(chain, tid, k, anchor, blocked, room, search_line, scope, avoid)
                if cell is None:
                    break
                source = free_source(cell)
                binding = self._bind_if_safe(chain, cell, owner, vc, entry_line)
                if binding is not None:
                    return binding
                avoid.add(source)
        return None

    @staticmethod
    def _home(owner: VcState, chain: Chain, tid: int, line: int) -> Cell | None:
        """Where a VC's new cell of type ``tid`` is looked for first: inside the top-level
        cell holding most of the VC's cells that still has a free one, so that its cells
        stay together and a later gang of the VC finds them side by side (fewer victims
        when it must preempt). Derived from the bindings alone: a restored engine decides
        the same."""
        free_count = chain.free_count if line == ANY_LINE else (chain.line_free.get(line) or chain.free_count)
        if not any(free_count[m] for m in [tid] + chain.ancestors[tid]):
            return None  # no free cell to bind anywhere: nothing to look for (a cycle saying no stays cheap)
        counts: dict[int, list] = {}
        for binding in owner.bindings.get(chain.sku.name, {}).values():
            cell = binding.cell
            if binding.pinned or cell.chain is not chain or (line != ANY_LINE and cell.line != line):
                continue
            root = cell.up[-1]
            if root.free_below[tid] == 0 and not any(root.free_below[m] for m in chain.ancestors[tid]):
                continue
            entry = counts.setdefault(root.id, [0, root])
            entry[0] += 1
        if counts:
            best = min(counts.items(), key=lambda item: (-item[1][0], item[0]))
            return best[1][1]
        # None yet with room: a free top-level cell of just that type (nothing split), else
        # the top-level cell with the most idle leaves, so that VCs start apart.
        roots = chain.roots if line == ANY_LINE else chain.line_roots.get(line, [])
        best_root, most = None, 0
        for root in roots:
            if root.tid == tid and root.free:
                return root
            if root.idle > most and (root.free_below[tid] or any(root.free_below[m] for m in chain.ancestors[tid])):
                best_root, most = root, root.idle
        return best_root

    def _bind_if_safe(self, chain: Chain, cell: Cell, owner: VcState, vc: VcState, line: int) -> Binding | None:
        mark = self.topology.mark()
        binding = self.ledger.new_binding(cell, owner.name, vc.name, line)
        if chain.is_safe():
            return binding
        self.topology.rollback(mark)
        return None

    def place_guaranteed(
        self, job: RunningJob, vc: VcState, needs: list[PodNeed], lenders: list[VcState] | None,
        blocked: Blocked, scopes: Mapping[str, Cell] | None = None,
    ) -> Shortage | None:
        """Place every pod or return the shortage (the caller rolls back on failure).
        ``scopes``: per SKU, only on nodes inside that cell (a preemption's cells)."""
        for sku, pods in _by_chain(needs):
            chain = self.topology.chains[sku]
            scope = scopes.get(sku) if scopes else None

            def place(line: int) -> tuple[Shortage | None, int]:
                return self._place_guaranteed_group(job, vc, chain, pods, lenders, blocked, line, scope)

            shortage = self._in_one_line(chain, pods, scope, place)
            if shortage is not None:
                return shortage
        return None

    def _in_one_line(self, chain: Chain, pods: list[PodNeed], scope: Cell | None, place) -> Shortage | None:
        """Place a gang's pods of one SKU inside one line: wherever the first pod goes,
        then, if the rest did not fit there, in each other line that has room."""
        first_line = ANY_LINE if scope is None else scope.line
        mark = self.topology.mark()
        shortage, used_line = place(first_line)
        if shortage is None or used_line == ANY_LINE or scope is not None or len(chain.line_roots) < 2:
            # Placed, or not even the first pod found room anywhere.
            return shortage
        self.topology.rollback(mark)
        total = sum(p.leaf_cells for p in pods)
        for line in chain.lines():
            if line == used_line or sum(root.idle for root in chain.line_roots[line]) < total:
                continue
            if place(line)[0] is None:
                return None
            self.topology.rollback(mark)
        return shortage

    def _place_guaranteed_group(
        self, job: RunningJob, vc: VcState, chain: Chain, pods: list[PodNeed], lenders: list[VcState] | None,
        blocked: Blocked, line: int, scope: Cell | None,
    ) -> tuple[Shortage | None, int]:
        gang: list[Node] = []
        anchor: Cell | None = None
        remaining = sum(p.leaf_cells for p in pods)
        multi = len(pods) > 1
        for need in pods:
            k = need.leaf_cells
            want = remaining if not gang and remaining <= chain.node_size else k
            room = remaining if multi and not gang and scope is None else 0
            spot = self._best_in_bindings(vc, chain, need, want, room, gang, anchor, blocked, line, scope)
            if spot is None and need.pinned_cell is None:
                binding = self._bind_new(vc, chain, k, anchor, None, blocked, room, line, scope)
                if binding is None and lenders:
                    binding = self._bind_new(vc, chain, k, anchor, lenders, blocked, room, line, scope)
                if binding is not None:
                    spot = self._best_in_bindings_of(binding, chain, k, gang, anchor, blocked, scope)
            if spot is None:
                return Shortage(chain.sku.name, k, need.pinned_cell), line
            node, binding = spot
            devices = self.pick_devices(node, binding.cell, k, blocked)
            self.ledger.add_pod(job, RunningPod(need.task_role, need.index, node, devices, binding))
            if node not in gang:
                gang.append(node)
            if anchor is None:
                anchor = node.cell
                if need.pinned_cell is None:
                    line = node.cell.line
            remaining -= k
        return None, line

    def _best_in_bindings_of(
        self, binding: Binding, chain: Chain, k: int, gang: list[Node], anchor: Cell | None, blocked: Blocked,
        scope: Cell | None,
    ) -> tuple[Node, Binding] | None:
        cell = binding.cell
        if cell.level <= chain.node_level:
            return cell.node, binding
        fitting = [
            n for n in cell.nodes
            if n.healthy and _unblocked_idle(n, n.cell, blocked) >= k and (scope is None or scope in n.cell.up)
        ]
        if not fitting:
            return None
        node = min(fitting, key=lambda n: (n not in gang, _lca_level(anchor, n), n.free - k, n.index))
        return node, binding

    # --- opportunistic pods ---------------------------------------------------------

    def place_opportunistic(self, job: RunningJob, needs: list[PodNeed], blocked: Blocked) -> Shortage | None:
        for sku, pods in _by_chain(needs):
            chain = self.topology.chains[sku]

            def place(line: int) -> tuple[Shortage | None, int]:
                return self._place_opportunistic_group(job, chain, pods, blocked, line)

            shortage = self._in_one_line(chain, pods, None, place)
            if shortage is not None:
                return shortage
        return None

    def _place_opportunistic_group(
        self, job: RunningJob, chain: Chain, pods: list[PodNeed], blocked: Blocked, line: int
    ) -> tuple[Shortage | None, int]:
        gang: list[Node] = []
        for need in pods:
            node = self._opportunistic_node(chain, need.leaf_cells, gang, blocked, line)
            if node is None:
                return Shortage(chain.sku.name, need.leaf_cells), line
            devices = self.pick_devices(node, node.cell, need.leaf_cells, blocked)
            self.ledger.add_pod(job, RunningPod(need.task_role, need.index, node, devices, None))
            if node not in gang:
                gang.append(node)
            line = node.cell.line
        return None, line

    def _opportunistic_node(self, chain: Chain, k: int, gang: list[Node], blocked: Blocked, line: int) -> Node | None:
        fits = [n for n in gang if n.healthy and _unblocked_idle(n, n.cell, blocked) >= k]
        if fits:
            return min(fits, key=lambda n: (n.free, n.index))
        for by_free in chain.buckets:
            for free in range(k, chain.node_size + 1):
                bucket = by_free[free]
                if not bucket:
                    continue
                if not blocked and line == ANY_LINE:
                    return chain.nodes[min(bucket)]
                nodes = chain.nodes
                index = min(
                    (
                        i for i in bucket
                        if (line == ANY_LINE or nodes[i].cell.line == line)
                        and _unblocked_idle(nodes[i], nodes[i].cell, blocked) >= k
                    ),
                    default=None,
                )
                if index is not None:
                    return nodes[index]
        return None

    @staticmethod
    def largest_free_cell_block(chain: Chain) -> int:
        """The most idle devices on one healthy node no VC has bound any part of."""
        for free in range(chain.node_size, 0, -1):
            if chain.buckets[OPP_WITH_OPP][free] or chain.buckets[OPP_IDLE_POOL][free]:
                return free
        return 0

    def largest_idle_block(self, chain: Chain) -> int:
        for free in range(chain.node_size, 0, -1):
            if any(by_free[free] for by_free in chain.buckets):
                return free
        return 0


def free_source(cell: Cell) -> tuple[int, int]:
    """The free cell that ``cell`` is, or lies inside, as (line, type): binding ``cell``
    takes or splits that one."""
    source = next(a for a in cell.up if a.free)
    return source.line, source.tid


def _by_chain(needs: list[PodNeed]) -> list[tuple[str, list[PodNeed]]]:
    groups: dict[str, list[PodNeed]] = {}
    for need in needs:
        groups.setdefault(need.sku, []).append(need)
    return [
        (sku, sorted(groups[sku], key=lambda p: (-p.leaf_cells, p.task_role, p.index)))
        for sku in sorted(groups)
    ]
