"""Read-only answers about jobs that other apps ask for."""

from django.db.models import Sum

from .models import Job


def resources_in_use_by_vc(vcs):
    """{vc_id: {"cpu", "memory", "gpu"}} held by jobs that hold cells, for each of `vcs`.

    A job holds its cells while running, and while waiting once the scheduler has placed
    it (its pods are starting). Memory is in MB, as OpenPAI reports it. One query.
    """
    ids = [vc.pk if hasattr(vc, "pk") else vc for vc in vcs]
    usage = {vc_id: {"cpu": 0, "memory": 0, "gpu": 0} for vc_id in ids}
    rows = (
        Job.objects.holding_cells()
        .filter(virtual_cluster_id__in=ids)
        .values("virtual_cluster_id")
        .annotate(cpu=Sum("cell_cpu"), memory=Sum("cell_memory_mb"), gpu=Sum("cell_gpu"))
        .order_by()
    )
    for row in rows:
        cpu = row["cpu"] or 0
        usage[row["virtual_cluster_id"]] = {
            "cpu": int(cpu) if float(cpu).is_integer() else cpu,
            "memory": int(row["memory"] or 0),
            "gpu": int(row["gpu"] or 0),
        }
    return usage
