"""Virtual clusters as cell quotas, and the configuration check of the safety invariant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .cells import Binding, Chain, Topology, collector_paused
from .errors import ConfigurationError
from .spec import ClusterSpec, VirtualClusterSpec


@dataclass
class VcState:
    """A VC's quota per (chain, level) and what it currently binds, borrows and lends."""

    spec: VirtualClusterSpec
    quota: dict[tuple[str, int], int]  # (sku, cell type id) -> guaranteed cells
    bound: dict[tuple[str, int], int] = field(default_factory=dict)  # own quota in use (incl. lent)
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

    @property
    def name(self) -> str:
        return self.spec.name

    def skus(self) -> list[str]:
        return self.sku_names

    def quota_types(self, sku: str) -> list[int]:
        return sorted(tid for (s, tid) in self.quota if s == sku)

    def unbound(self, sku: str, tid: int) -> int:
        return self.quota.get((sku, tid), 0) - self.bound.get((sku, tid), 0)

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
        ):
            if value is not None and value < 0:
                raise ConfigurationError(f"VC {vc.name!r} has a negative {what}: {value}")
        quota: dict[tuple[str, int], int] = {}
        for cell_type, count in vc.cells:
            chain = topology.chain_of_type.get(cell_type)
            if chain is None:
                raise ConfigurationError(f"VC {vc.name!r} names unknown cell type {cell_type!r}", cell_type=cell_type)
            if count < 0:
                raise ConfigurationError(f"VC {vc.name!r} has a negative count of {cell_type}", cell_type=cell_type)
            if count:
                key = (chain.sku.name, chain.tid(cell_type))
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
        for (sku, tid), count in state.quota.items():
            chain = topology.chains[sku]
            chain.demand[tid] += count
            state.leaves_by_sku[sku] = state.leaves_by_sku.get(sku, 0) + count * chain.leaves[tid]
            state.largest_by_sku[sku] = max(state.largest_by_sku.get(sku, 0), chain.leaves[tid])
        pinned_skus = {b.cell.chain.sku.name for b in state.pinned.values()}
        state.sku_names = sorted({sku for sku, _ in state.quota} | pinned_skus)
    return states


def check_safety(topology: Topology, states: dict[str, VcState]) -> None:
    """Refuse quotas the free cluster cannot back, naming the chain, level and shortfall."""
    for sku in sorted(topology.chains):
        chain = topology.chains[sku]
        short = chain.shortfall(chain.free_count)
        for tid in chain.order:
            if short[tid] == 0:
                continue
            need = chain.demand[tid]
            cell_type = chain.names[tid]
            level = chain.level[tid]
            claimants = sorted(
                (s for s in states.values() if s.quota.get((sku, tid))),
                key=lambda s: (-s.quota[(sku, tid)], s.name),
            )
            who = f"VC {claimants[0].name!r}" + (" and others need" if len(claimants) > 1 else " needs")
            raise ConfigurationError(
                f"{who} {need} cells of {cell_type} (level {level}, chain {sku}) but the cluster "
                f"can supply {need - short[tid]}: short by {short[tid]}",
                cell_type=cell_type,
                level=level,
                shortfall=short[tid],
                chain=sku,
            )


def validate_configuration(cluster: ClusterSpec, vcs: Sequence[VirtualClusterSpec]) -> None:
    """Raise :class:`ConfigurationError` if the cluster or the VCs are invalid together."""
    with collector_paused():
        topology = Topology(cluster)
        states = resolve_quotas(topology, vcs)
    check_safety(topology, states)
