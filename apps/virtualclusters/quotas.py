"""A cluster's cells as quotas see them, for the admins who set quotas: the capacity table
(per SKU, chain and cell type: the cells, what each VC is guaranteed, what is free), the
words of a refused quota, and the running jobs a smaller quota would leave without their
guarantee.

Every figure comes from the engine (`scheduler.capacity`, `scheduler.quota_shortages`,
`Engine.restore`), so what an admin reads is what the scheduler decides by.
"""

from dataclasses import dataclass, field

from django.db.models import Prefetch

import scheduler
from apps.accounts.roles import is_platform_admin
from apps.clusters.services import cluster_spec
from apps.clusters.topology import CellChains

from .models import PinnedCell, VirtualCluster

OTHERS = "other teams"  # how VCs a team admin may not see are named in their table


@dataclass
class CapacityRow:
    chain: str  # the chain's top-level cell type; "any" for the pool entries naming no chain draw from
    cell_type: str
    level: int
    leaves: int  # leaf cells in one cell of the type
    cells: int
    guaranteed: list  # [(VC name, cells)]
    pinned: list  # [(VC name, cells)]
    spare: int


@dataclass
class SkuCapacity:
    sku: str
    leaf_cells: int
    free_leaf_cells: int
    rows: list = field(default_factory=list)


@dataclass
class ClusterCapacity:
    cluster: object
    skus: list = field(default_factory=list)
    error: str = ""


def _stored_specs(cluster, chains, exclude=None):
    """(VirtualCluster, VirtualClusterSpec) of every VC on the cluster, in a few queries."""
    vcs = (
        VirtualCluster.objects.filter(cluster=cluster)
        .prefetch_related("cells", Prefetch("pinned_cells", queryset=PinnedCell.objects.select_related("physical_cell")))
        .order_by("name")
    )
    if exclude is not None and exclude.pk is not None:
        vcs = vcs.exclude(pk=exclude.pk)
    from .services import vc_spec

    return [
        (vc, vc_spec(vc, cells=[(chains.by_id[c.cell_type_id], c.count, chains.by_id.get(c.chain_id)) for c in vc.cells.all()],
                     pinned_ids=[p.physical_cell.pinned_id or p.physical_cell.address for p in vc.pinned_cells.all()]))
        for vc in vcs
    ]


def _named(pairs, shown):
    """[(name, count)] with the names a viewer may not see folded into one `OTHERS` entry."""
    out, others = [], 0
    for name, count in pairs:
        if shown is None or name in shown:
            out.append((name, count))
        else:
            others += count
    return out + ([(OTHERS, others)] if others else [])


def cluster_capacity(cluster, viewer):
    """The capacity table of one cluster. Platform admins see every VC by name; others see
    the VCs visible to them by name and the rest as "other teams"."""
    chains = CellChains.for_cluster(cluster)
    shown = None
    if not is_platform_admin(viewer):
        shown = set(VirtualCluster.objects.visible_to(viewer).filter(cluster=cluster).values_list("name", flat=True))
    specs = [spec for _vc, spec in _stored_specs(cluster, chains)]
    try:
        table = scheduler.capacity(cluster_spec(cluster), specs)
    except scheduler.ConfigurationError as exc:
        return ClusterCapacity(cluster, error=str(exc))
    result = ClusterCapacity(cluster)
    for sku in sorted({c.sku for c in table}):
        groups = [c for c in table if c.sku == sku]
        pool, lines = groups[0], groups[1:]
        leaf = pool.types[-1]
        entry = SkuCapacity(sku, leaf_cells=leaf.cells, free_leaf_cells=leaf.spare)
        # The chains get rows of their own when there is a choice of chain, or an entry names one.
        show_lines = len(lines) > 1 or any(t.guaranteed for g in lines for t in g.types)
        label = "any" if show_lines else (lines[0].chain if lines else "any")
        for group in [pool] + (lines if show_lines else []):
            for t in group.types:
                entry.rows.append(CapacityRow(
                    chain=label if group.chain is None else group.chain, cell_type=t.cell_type, level=t.level,
                    leaves=chains.leaf_count(chains.by_name[t.cell_type]), cells=t.cells,
                    guaranteed=_named(t.guaranteed, shown), pinned=_named(t.pinned, shown), spare=t.spare,
                ))
        result.skus.append(entry)
    return result


def _count(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def refusal_message(cluster, changed_vc, cells, pinned_ids, error):
    """Why `changed_vc` with `cells` (and `pinned_ids`) does not fit the cluster, in an
    admin's terms: what it asks beyond what is free, what the cluster has and who holds it."""
    from .services import vc_spec

    prefix = f"Cluster {cluster.name} cannot back VC '{changed_vc.name}'"
    chains = CellChains.for_cluster(cluster)
    spec = cluster_spec(cluster)
    others = [s for _vc, s in _stored_specs(cluster, chains, exclude=changed_vc)]
    try:
        scheduler.validate_configuration(spec, others)
    except scheduler.ConfigurationError as exc:
        return (
            f"{prefix}: the other VCs' quotas already exceed the cluster's cells ({exc}); "
            "shrink them or add cells before changing this one."
        )
    try:
        shortages = scheduler.quota_shortages(spec, others, vc_spec(changed_vc, cells, pinned_ids))
        table = scheduler.capacity(spec, others)
    except scheduler.ConfigurationError as exc:
        return f"{prefix}: {exc}"
    if not shortages:
        return f"{prefix}: {error}"
    asks = []
    for s in shortages:
        entry = s.cell_type if s.chain is None else f"{s.chain}.{s.cell_type}"
        free = "none is free" if s.free == 0 else f"only {s.free} {'is' if s.free == 1 else 'are'} free"
        asks.append(f"it asks for {s.asked} × {entry} and {free} (short by {s.short})")
    held = []
    for sku in sorted({s.sku for s in shortages}):
        groups = [c for c in table if c.sku == sku]
        leaf = groups[0].types[-1]
        holdings = {}  # VC -> [(words, leaf cells)]
        for group in groups:
            for t in group.types:
                leaves = chains.leaf_count(chains.by_name[t.cell_type])
                entry = t.cell_type if group.chain is None else f"{group.chain}.{t.cell_type}"
                for name, count in t.guaranteed:
                    holdings.setdefault(name, []).append((f"{count} × {entry}", count * leaves))
                if group.chain is None:
                    for name, count in t.pinned:
                        holdings.setdefault(name, []).append((f"{count} pinned {t.cell_type}", count * leaves))
        who = [
            f"{name} holds {' and '.join(words for words, _ in parts)} ({sum(n for _, n in parts)})"
            for name, parts in sorted(holdings.items())
        ]
        free = "none is free" if leaf.spare == 0 else f"{leaf.spare} {'is' if leaf.spare == 1 else 'are'} free"
        held.append(
            f"The cluster has {_count(leaf.cells, sku + ' cell')}"
            + (f": {', '.join(who)}; {free}." if who else f"; {free}.")
        )
    return f"{prefix}: {'; '.join(asks)}. {' '.join(held)}"


@dataclass(frozen=True)
class AffectedJob:
    job: object
    leaf_cells: int
    reason: str

    def __str__(self):
        return f"{self.job.owner.username}~{self.job.name} ({self.leaf_cells} cells: {self.reason})"


def jobs_losing_guarantee(cluster, changed_vc, cells, pinned_ids=None):
    """The running jobs that hold guaranteed cells now and would not with `changed_vc`'s
    quota set to `cells`: the engine restores the current placements under both
    configurations (as the worker does after a change), and the jobs demoted only under
    the new one are listed. The worker then runs them on as opportunistic: preemptible."""
    from apps.jobs.choices import COMPLETED_STATES, JobState
    from apps.jobs.models import Job
    from apps.jobs.worker.controller import allocation_from_json, engine_job_id

    from .services import quota_entries, vc_spec

    if changed_vc.pk is None:
        return []
    stored_cells = {
        (cell_type_id, chain_id): count
        for cell_type_id, chain_id, count in changed_vc.cells.values_list("cell_type_id", "chain_id", "count")
    }
    wanted = {}
    for cell_type, count, chain in quota_entries(cells):
        key = (cell_type.pk, chain.pk if chain is not None else None)
        wanted[key] = wanted.get(key, 0) + count
    stored_pinned = {
        p.physical_cell.pinned_id or p.physical_cell.address for p in changed_vc.pinned_cells.select_related("physical_cell")
    }
    if all(wanted.get(k, 0) >= n for k, n in stored_cells.items()) and (
        pinned_ids is None or stored_pinned <= set(pinned_ids)
    ):
        return []  # nothing taken away: nothing held can be lost
    jobs = {
        engine_job_id(job.pk): job
        for job in Job.objects.filter(
            virtual_cluster__cluster=cluster,
            state__in=[s for s in JobState.values if s not in COMPLETED_STATES],
            placement__isnull=False,
        ).select_related("owner")
    }
    if not jobs:
        return []
    chains = CellChains.for_cluster(cluster)
    spec = cluster_spec(cluster)
    stored = [s for _vc, s in _stored_specs(cluster, chains)]
    changed = [s for s in stored if s.name != changed_vc.name] + [vc_spec(changed_vc, cells, pinned_ids)]
    allocations = [allocation_from_json(job.placement) for job in jobs.values()]

    def demoted(specs):
        try:
            engine = scheduler.Engine(spec, specs)
        except scheduler.ConfigurationError:
            return {}
        return {issue.job_id: issue.reason for issue in engine.restore(allocations).demoted}

    before, after = demoted(stored), demoted(changed)
    affected = []
    for job_id in sorted(set(after) - set(before), key=lambda j: (jobs[j].owner.username, jobs[j].name)):
        job = jobs[job_id]
        leaf_cells = sum(len(pod["devices"]) for pod in job.placement["pods"])
        affected.append(AffectedJob(job, leaf_cells, after[job_id]))
    return affected


def shrink_message(changed_vc, affected):
    listed = "; ".join(str(a) for a in affected)
    return (
        f"The new quota of VC '{changed_vc.name}' is below what its running jobs hold: "
        f"{_count(len(affected), 'job')} would lose {'its' if len(affected) == 1 else 'their'} guarantee and run on as "
        f"opportunistic, which any guaranteed job may preempt — {listed}. Tick \"Shrink below running jobs\" to confirm."
    )
