"""What a VC's cells and a cluster's nodes are doing now, as the scheduler sees them.

The figures come from the engine itself, rebuilt from the database the way the worker
rebuilds it after a start (`apps.jobs.worker.controller.Controller.refresh_configuration`):
the cluster's cells, every VC's quota, the placements and reservations of the jobs that
hold cells, and the nodes' health. `Engine.vc_status` then counts each VC's cells by type
(guaranteed, used, borrowed, lent, bad, free) and `Engine.node_status` each node's
devices: the portal shows what the scheduler decides by, not a second count of it.

The cost is a handful of queries per cluster whatever the number of jobs: the jobs read
are those holding cells or reserving them (bounded by the cluster's size), through the
state index.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Q

import scheduler
from scheduler.engine import FOREIGN
from apps.clusters.models import Node, PhysicalCell
from apps.clusters.services import cluster_spec
from apps.clusters.topology import CellChains

from .quotas import _stored_specs

# Jobs in these states may hold a placement; the others (completed) have dropped theirs.
_LIVE_STATES = ("WAITING", "RUNNING", "STOPPING", "UNKNOWN")


@dataclass
class ClusterState:
    cluster: object
    chains: CellChains
    engine: object = None  # None when the stored configuration does not make an engine
    error: str = ""
    vcs: list = field(default_factory=list)  # the cluster's VirtualCluster rows, by name


def cluster_state(cluster):
    """The engine of `cluster` with the current placements restored and node health set."""
    from apps.jobs.models import Job
    from apps.jobs.worker.controller import allocation_from_json

    chains = CellChains.for_cluster(cluster)
    stored = _stored_specs(cluster, chains)
    state = ClusterState(cluster, chains, vcs=[vc for vc, _spec in stored])
    try:
        engine = scheduler.Engine(cluster_spec(cluster), [spec for _vc, spec in stored])
    except scheduler.ConfigurationError as exc:
        state.error = str(exc)
        return state
    # Through the partial index `job_placed`: the jobs holding or reserving cells only.
    held = Job.objects.filter(
        Q(placement__isnull=False) | Q(reservation__isnull=False),
        virtual_cluster_id__in=[vc.pk for vc in state.vcs], state__in=_LIVE_STATES,
    )
    allocations = []
    for placement, reservation in held.values_list("placement", "reservation"):
        if placement is not None:
            allocations.append(allocation_from_json(placement))
        elif reservation is not None:
            allocations.append(allocation_from_json(reservation))
    engine.restore(allocations)
    nodes = Node.objects.filter(cluster=cluster).values_list("name", "ready", "schedulable", "cells_used_by_others")
    for name, ready, schedulable, used_by_others in nodes:
        # A node the backend reports but no cell describes holds nothing; a host carrying
        # several SKUs is their nodes.
        if engine.knows_node(name):
            engine.set_node_health(name, ready and schedulable)
            engine.set_node_foreign_use(name, used_by_others)
    state.engine = engine
    return state


def vc_statuses(vcs):
    """{vc.pk: scheduler.VcStatus} for `vcs` (VirtualCluster rows), one engine per cluster.

    A cluster whose configuration the engine refuses (cells that cannot back the quotas)
    gives its VCs no status rather than an error: the page shows that it is unknown.
    """
    by_cluster = defaultdict(list)
    for vc in vcs:
        by_cluster[vc.cluster_id].append(vc)
    result = {}
    for members in by_cluster.values():
        state = cluster_state(members[0].cluster)
        if state.engine is None:
            continue
        for vc in members:
            try:
                result[vc.pk] = state.engine.vc_status(vc.name)
            except ValueError:
                pass
    return result


@dataclass
class CellRow:
    """One row of a VC's cells: a cell type (of one chain when the quota names one)."""

    cell_type: str
    chain: str
    level: int
    leaves: int  # leaf cells in one cell of the type
    guaranteed: int
    used: int
    borrowed: int
    lent: int
    bad: int
    free: int


def vc_cells(state, vc):
    """The VC's cells by type from the engine: [CellRow], and its used and opportunistic
    leaf cells per SKU."""
    status = state.engine.vc_status(vc.name)
    rows = []
    for c in status.cells:
        ct = state.chains.by_name.get(c.cell_type)
        rows.append(CellRow(
            cell_type=c.cell_type, chain=c.chain or "any", level=c.level,
            leaves=state.chains.leaf_count(ct) if ct is not None else 1,
            guaranteed=c.guaranteed, used=c.used, borrowed=c.borrowed, lent=c.lent, bad=c.bad, free=c.free,
        ))
    return rows, dict(status.used_leaf_cells), dict(status.opportunistic_leaf_cells)


@dataclass
class NodeTile:
    name: str
    sku: str
    healthy: bool
    devices: int
    used: int  # by pai's jobs
    opportunistic: int  # of `used`, by opportunistic jobs
    foreign: int  # held by pods that are not pai's
    bad: int
    free: int
    jobs: int  # distinct jobs of pai's on the node

    @property
    def squares(self):
        """One word per device, for a heatmap: used, opp (used by an opportunistic job),
        foreign (held by another pod), free, bad."""
        return (["used"] * (self.used - self.opportunistic) + ["opp"] * self.opportunistic
                + ["foreign"] * self.foreign + ["free"] * self.free + ["bad"] * self.bad)


@dataclass
class NodeGroup:
    name: str  # the top-level physical cell (a rack) holding the nodes, or the node type for loose nodes
    chain: str  # the top-level cell type
    nodes: list = field(default_factory=list)

    @property
    def totals(self):
        return {k: sum(getattr(n, k) for n in self.nodes) for k in ("devices", "used", "foreign", "bad", "free")}


def node_groups(state):
    """The cluster's nodes as the engine sees them, grouped by their top-level physical
    cell (the rack), racks by name. A node's devices are used (by pai's running or
    preempting jobs), held by pods that are not pai's, bad (unused on an unhealthy node)
    or free."""
    cells = {
        pk: (parent_id, address, cell_type_id)
        for pk, parent_id, address, cell_type_id in PhysicalCell.objects.filter(cluster=state.cluster).values_list(
            "pk", "parent_id", "address", "cell_type_id"
        )
    }
    root_of = {}
    for pk, (parent_id, address, cell_type_id) in cells.items():
        top = pk
        while cells[top][0] is not None and cells[top][0] in cells:
            top = cells[top][0]
        root_of[address] = (cells[top][1], state.chains.by_id[cells[top][2]].name, top == pk)
    groups = {}
    for name in sorted(state.engine.topology.nodes):
        s = state.engine.node_status(name)
        mine = [d for d in s.used if d.job_id != FOREIGN]
        foreign = len(s.used) - len(mine)
        bad = 0 if s.healthy else s.devices - len(s.used)
        tile = NodeTile(
            name=name, sku=s.sku, healthy=s.healthy, devices=s.devices, used=len(mine),
            opportunistic=sum(1 for d in mine if d.opportunistic), foreign=foreign, bad=bad,
            free=s.devices - len(s.used) - bad, jobs=len({d.job_id for d in mine}),
        )
        root, chain, loose = root_of.get(name, (name, s.sku, True))
        key = (chain, f"{chain} nodes") if loose else (chain, root)
        groups.setdefault(key, NodeGroup(name=key[1], chain=chain)).nodes.append(tile)
    return [groups[k] for k in sorted(groups)]
