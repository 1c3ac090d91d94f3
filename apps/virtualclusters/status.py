"""A VC's cells by type as the scheduler sees them (guaranteed, used, free, bad, borrowed, lent),
for pages: the engine is built from the database as the worker builds it — the cluster's
cells, every VC's quota, node health, the placements and reservations of the jobs holding
cells — and asked. Nothing is written."""

from collections import defaultdict

import scheduler
from apps.clusters.models import Node
from apps.clusters.services import cluster_spec

from .models import VirtualCluster
from .services import vc_spec


def _engine(cluster):
    from apps.jobs.models import Job
    from apps.jobs.worker.controller import allocation_from_json

    vcs = list(VirtualCluster.objects.filter(cluster=cluster).order_by("name"))
    engine = scheduler.Engine(cluster_spec(cluster), [vc_spec(vc) for vc in vcs])
    for name, ready, schedulable in Node.objects.filter(cluster=cluster).values_list("name", "ready", "schedulable"):
        try:
            engine.set_node_health(name, ready and schedulable)
        except ValueError:
            pass  # a node the backend reports but no cell describes: nothing of a VC's on it
    jobs = Job.objects.filter(virtual_cluster__cluster=cluster)
    placed = jobs.filter(placement__isnull=False).exclude(state__in=["STOPPED", "SUCCEEDED", "FAILED"])
    allocations = [allocation_from_json(p) for p in placed.values_list("placement", flat=True)]
    reserving = jobs.filter(state="WAITING", placement__isnull=True).exclude(reservation=None)
    allocations += [allocation_from_json(r) for r in reserving.values_list("reservation", flat=True)]
    engine.restore(allocations)
    return engine


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
        try:
            engine = _engine(members[0].cluster)
        except scheduler.ConfigurationError:
            continue
        for vc in members:
            try:
                result[vc.pk] = engine.vc_status(vc.name)
            except ValueError:
                pass
    return result
