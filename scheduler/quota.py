"""Virtual clusters as cell quotas, and the configuration check of the safety invariant."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from .cells import ANY_LINE, Binding, Chain, Topology, collector_paused
from .decisions import ChainCapacity, Shortage, TypeCapacity
from .errors import ConfigurationError
from .spec import ClusterSpec, VirtualClusterSpec


QuotaKey = tuple[str, int, int]  # (sku, cell type id, line: the chain's top-level type id or ANY_LINE)


@dataclass
class VcState:
    """A VC's quota per (SKU, cell type, chain) and what it currently binds, borrows and lends."""

    spec: VirtualClusterSpec
    quota: dict[QuotaKey, int]  # -> guaranteed cells
    bound: dict[QuotaKey, int] = field(default_factory=dict)  # own quota in use (incl. lent)
    bindings: dict[str, dict[int, Binding]] = field(default_factory=dict)  # sku -> cell id -> binding used by this VC
    pinned: dict[str, Binding] = field(default_factory=dict)
    used_leaves: dict[str, int] = field(default_factory=dict)  # guaranteed leaves in use, by sku
    own_used_by_priority: dict[str, dict[int, int]] = field(default_factory=dict)
    user_leaves: dict[str, int] = field(default_factory=dict)
    borrowed_leaves: dict[str, int] = field(default_factory=dict)
    lent_leaves: dict[str, int] = field(default_factory=dict)  # by sku
    # Fixed by the configuration, so computed once.
    leaves_by_sku: dict[str, int] = field(default_factory=dict)
    largest_by_sku: dict[str, int] = field(default_factory=dict)
    sku_names: list[str] = field(default_factory=list)
    entries_by_sku: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    def skus(self) -> list[str]:
        return self.sku_names

    def quota_entries(self, sku: str) -> list[tuple[int, int]]:
        """(cell type id, line) of each quota entry of the SKU; entries naming a chain
        come before the one naming none, as their cells are the scarcer."""
        found = self.entries_by_sku.get(sku)
        if found is None:
            found = self.entries_by_sku[sku] = sorted(
                ((tid, line) for (s, tid, line) in self.quota if s == sku), key=lambda e: (e[0], e[1] == ANY_LINE, e[1])
            )
        return found

    def unbound(self, sku: str, tid: int, line: int) -> int:
        key = (sku, tid, line)
        return self.quota.get(key, 0) - self.bound.get(key, 0)

    def has_unbound(self, sku: str) -> bool:
        return any(self.unbound(sku, tid, line) > 0 for tid, line in self.quota_entries(sku))

    def quota_leaves(self, chain: Chain) -> int:
        return self.leaves_by_sku.get(chain.sku.name, 0)

    def largest_cell_leaves(self, chain: Chain) -> int:
        return self.largest_by_sku.get(chain.sku.name, 0)

    def total_borrowed(self) -> int:
        return sum(self.borrowed_leaves.values())

    def total_lent(self) -> int:
        return sum(self.lent_leaves.values())

    def own_used_leaves(self, sku: str) -> int:
        return sum(self.own_used_by_priority.get(sku, {}).values())


def resolve_quotas(topology: Topology, vcs: Sequence[VirtualClusterSpec]) -> dict[str, VcState]:
    """Check each VC's entries refer to known cell types and pinned cells."""
    states: dict[str, VcState] = {}
    pinned_owner: dict[str, str] = {}
    for vc in vcs:
        if vc.name in states:
            raise ConfigurationError(f"VC {vc.name!r} is defined twice")
        if vc.weight <= 0:
            raise ConfigurationError(f"VC {vc.name!r} needs a positive weight, has {vc.weight}")
        for what, value in (
            ("borrowing_limit", vc.borrowing_limit),
            ("lending_limit", vc.lending_limit),
            ("max_leaf_cells_per_user", vc.max_leaf_cells_per_user),
            ("starvation_threshold", vc.starvation_threshold),
        ):
            if value is not None and value < 0:
                raise ConfigurationError(f"VC {vc.name!r} has a negative {what}: {value}")
        quota: dict[QuotaKey, int] = {}
        for entry, count in vc.cells:
            chain, tid, line = quota_entry(topology, vc.name, entry)
            if count < 0:
                raise ConfigurationError(f"VC {vc.name!r} has a negative count of {entry}", cell_type=entry)
            if count:
                key = (chain.sku.name, tid, line)
                quota[key] = quota.get(key, 0) + count
        for pinned_id in vc.pinned_cells:
            if pinned_id not in topology.pinned:
                raise ConfigurationError(f"VC {vc.name!r} names unknown pinned cell {pinned_id!r}")
            if pinned_id in pinned_owner:
                raise ConfigurationError(
                    f"pinned cell {pinned_id!r} is owned by both VC {pinned_owner[pinned_id]!r} and VC {vc.name!r}"
                )
            pinned_owner[pinned_id] = vc.name
        states[vc.name] = VcState(spec=vc, quota=quota)
    topology.init_free(pinned_owner)
    for pinned_id, owner in pinned_owner.items():
        cell = topology.pinned[pinned_id]
        states[owner].pinned[pinned_id] = cell.binding
    for state in states.values():
        for (sku, tid, line), count in state.quota.items():
            chain = topology.chains[sku]
            if line == ANY_LINE:
                chain.demand[tid] += count
            else:
                chain.line_demand.setdefault(line, [0] * len(chain.names))[tid] += count
                chain.bound_demand += count
            state.leaves_by_sku[sku] = state.leaves_by_sku.get(sku, 0) + count * chain.leaves[tid]
            state.largest_by_sku[sku] = max(state.largest_by_sku.get(sku, 0), chain.leaves[tid])
        pinned_skus = {b.cell.chain.sku.name for b in state.pinned.values()}
        state.sku_names = sorted({key[0] for key in state.quota} | pinned_skus)
    return states


def entry_name(chain: Chain, tid: int, line: int) -> str:
    """A quota entry as a VC spells it: ``TYPE`` or ``CHAIN.TYPE``."""
    key = (tid, line)
    name = chain.entry_names.get(key)
    if name is None:
        name = chain.names[tid] if line == ANY_LINE else f"{chain.names[line]}.{chain.names[tid]}"
        chain.entry_names[key] = name
    return name


def quota_entry(topology: Topology, vc: str, entry: str) -> tuple[Chain, int, int]:
    """Resolve a VC's quota entry: a cell type (``A100-NODE``, a leaf ``A100`` too), or
    a cell type in one chain, named by the chain's top-level type as HiveD does
    (``A100-RACK3.A100-NODE``). Returns (chain, cell type id, line)."""
    line_name, _, cell_type = entry.rpartition(".")
    chain = topology.chain_of_type.get(cell_type)
    if chain is None and line_name and entry in topology.chain_of_type:
        # A cell type whose name holds a dot, naming no chain.
        line_name, cell_type = "", entry
        chain = topology.chain_of_type[entry]
    if chain is None:
        unused = f" ({'; '.join(topology.warnings)})" if topology.warnings else ""
        raise ConfigurationError(f"VC {vc!r} names unknown cell type {cell_type!r}{unused}", cell_type=cell_type)
    tid = chain.tid(cell_type)
    if not line_name:
        return chain, tid, ANY_LINE
    lines = {chain.names[t]: t for t in chain.line_roots}
    if line_name not in lines:
        known = ", ".join(sorted(lines)) or "none"
        raise ConfigurationError(
            f"VC {vc!r} names chain {line_name!r}, which is not a top-level cell type of SKU {chain.sku.name} "
            f"(its chains: {known})",
            cell_type=entry,
            chain=chain.sku.name,
        )
    line = lines[line_name]
    if not chain.in_line(tid, line):
        raise ConfigurationError(
            f"VC {vc!r} names {entry!r}, but chain {line_name!r} has no {cell_type} cells "
            f"(its types: {', '.join(chain.names[t] for t in chain.line_types(line))})",
            cell_type=entry,
            chain=chain.sku.name,
        )
    return chain, tid, line


def check_safety(topology: Topology, states: dict[str, VcState]) -> None:
    """Refuse quotas the free cluster cannot back, naming the chain, level and shortfall."""
    for sku in sorted(topology.chains):
        chain = topology.chains[sku]
        for line in sorted(chain.line_demand, key=lambda t: chain.names[t]):
            demand = chain.line_demand[line]
            supply = chain.line_free.get(line) or [0] * len(chain.names)
            short = chain.shortfall(supply, demand)
            _refuse_short(chain, states, short, demand, line)
        supply = chain.pool_supply(chain.line_free, chain.line_demand)
        assert supply is not None  # every line backs its own entries (checked above)
        _refuse_short(chain, states, chain.shortfall(supply, chain.demand), chain.demand, ANY_LINE)


def _refuse_short(chain: Chain, states: dict[str, VcState], short: list[int], demand: list[int], line: int) -> None:
    sku = chain.sku.name
    for tid in chain.order:
        if short[tid] == 0:
            continue
        need = demand[tid]
        cell_type = chain.names[tid]
        level = chain.level[tid]
        key = (sku, tid, line)
        claimants = sorted((s for s in states.values() if s.quota.get(key)), key=lambda s: (-s.quota[key], s.name))
        who = f"VC {claimants[0].name!r}" + (" and others need" if len(claimants) > 1 else " needs")
        where = f"chain {sku}" if line == ANY_LINE else f"chain {chain.names[line]} of {sku}"
        raise ConfigurationError(
            f"{who} {need} cells of {cell_type} (level {level}, {where}) but the cluster "
            f"can supply {need - short[tid]}: short by {short[tid]}",
            cell_type=cell_type,
            level=level,
            shortfall=short[tid],
            chain=sku,
        )


def validate_configuration(cluster: ClusterSpec, vcs: Sequence[VirtualClusterSpec]) -> tuple[str, ...]:
    """Raise :class:`ConfigurationError` if the cluster or the VCs are invalid together;
    return the warnings about what the engine ignores (unused cell types)."""
    with collector_paused():
        topology = Topology(cluster)
        states = resolve_quotas(topology, vcs)
    check_safety(topology, states)
    return tuple(topology.warnings)


def capacity(cluster: ClusterSpec, vcs: Sequence[VirtualClusterSpec]) -> tuple[ChainCapacity, ...]:
    """Per SKU and chain, each cell type's physical cells, the VCs' guarantees and pinned
    cells, and what is spare: the table an admin reads before changing a quota.

    Per SKU, the pool (``chain=None``: all its cells, the entries naming no chain) comes
    first, then each chain by name. Pure and deterministic; raises
    :class:`ConfigurationError` only for what :func:`validate_configuration` refuses
    before its safety check (unknown types, pinned cells...). A configuration the cells
    cannot back shows a spare of 0 everywhere it runs short.
    """
    with collector_paused():
        topology = Topology(cluster)
        states = resolve_quotas(topology, vcs)
    pinned: dict[tuple[str, int, int], dict[str, int]] = {}  # (sku, line or ANY_LINE, tid) -> vc -> cells
    for state in states.values():
        for binding in state.pinned.values():
            cell = binding.cell
            for line in (ANY_LINE, cell.line):
                held = pinned.setdefault((cell.chain.sku.name, line, cell.tid), {})
                held[state.name] = held.get(state.name, 0) + 1
    out: list[ChainCapacity] = []
    for sku in sorted(topology.chains):
        chain = topology.chains[sku]
        per_line = {line: _line_cells(chain, line) for line in chain.lines()}
        if not per_line:
            continue
        pool: dict[int, int] = {}
        for cells in per_line.values():
            for tid, n in cells.items():
                pool[tid] = pool.get(tid, 0) + n
        groups = [(None, ANY_LINE, pool)] + [(chain.names[line], line, per_line[line]) for line in per_line]
        for name, line, cells in groups:
            rows = []
            for tid in chain.order:
                if tid not in cells:
                    continue
                key = (sku, tid, line)
                guaranteed = sorted(
                    ((s.name, s.quota[key]) for s in states.values() if s.quota.get(key)), key=lambda e: (-e[1], e[0])
                )
                pins = sorted(pinned.get((sku, line, tid), {}).items(), key=lambda e: (-e[1], e[0]))
                rows.append(
                    TypeCapacity(
                        cell_type=chain.names[tid], level=chain.level[tid], cells=cells[tid],
                        guaranteed=tuple(guaranteed), pinned=tuple(pins), spare=_spare(chain, tid, line, cells[tid]),
                    )
                )
            out.append(ChainCapacity(sku=sku, chain=name, types=tuple(rows)))
    return tuple(out)


def quota_shortages(
    cluster: ClusterSpec, others: Sequence[VirtualClusterSpec], vc: VirtualClusterSpec
) -> tuple[Shortage, ...]:
    """What ``vc``'s quota asks beyond what the cluster has left once ``others`` are
    guaranteed: its entries are granted one at a time (per SKU, entries naming a chain
    first, then from the largest cell type down), each as far as the cells left allow;
    every entry that does not fully fit is a :class:`Shortage`. Empty when the quota fits.
    Pure and deterministic."""
    with collector_paused():
        topology = Topology(cluster)
        resolve_quotas(topology, [*others, replace(vc, cells=())])
    asked: dict[tuple[str, int, int], int] = {}
    chains: dict[str, Chain] = {}
    for entry, count in vc.cells:
        chain, tid, line = quota_entry(topology, vc.name, entry)
        if count > 0:
            key = (chain.sku.name, tid, line)
            asked[key] = asked.get(key, 0) + count
            chains[chain.sku.name] = chain
    out: list[Shortage] = []
    for sku, tid, line in sorted(
        asked, key=lambda k: (k[0], k[2] == ANY_LINE, chains[k[0]].line_name(k[2]) or "", chains[k[0]].order.index(k[1]))
    ):
        chain = chains[sku]
        want = asked[(sku, tid, line)]
        free = _spare(chain, tid, line, want)
        _add_demand(chain, tid, line, free)
        if free < want:
            out.append(
                Shortage(
                    sku=sku, chain=chain.line_name(line), cell_type=chain.names[tid], level=chain.level[tid],
                    asked=want, free=free,
                )
            )
    return tuple(out)


def _line_cells(chain: Chain, line: int) -> dict[int, int]:
    """Physical cells of each type in one chain (its top-level cells all have one shape)."""
    cells, n = {}, len(chain.line_roots[line])
    for tid in chain.line_types(line):
        cells[tid] = n
        n *= chain.child_count[tid]
    return cells


def _add_demand(chain: Chain, tid: int, line: int, n: int) -> None:
    if line == ANY_LINE:
        chain.demand[tid] += n
    else:
        chain.line_demand.setdefault(line, [0] * len(chain.names))[tid] += n
        chain.bound_demand += n


def _spare(chain: Chain, tid: int, line: int, most: int) -> int:
    """The most cells (up to ``most``) of type ``tid`` one more entry naming ``line``
    could be guaranteed with the chain still safe. Safety only gets harder as demand
    grows, so a binary search over the count finds it with the engine's own check."""

    def safe_with(extra: int) -> bool:
        _add_demand(chain, tid, line, extra)
        try:
            return chain.is_safe()
        finally:
            _add_demand(chain, tid, line, -extra)

    if not safe_with(0):
        return 0
    low, high = 0, most
    while low < high:
        mid = (low + high + 1) // 2
        if safe_with(mid):
            low = mid
        else:
            high = mid - 1
    return low
