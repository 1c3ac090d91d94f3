"""What the scheduler needs to enforce GPU-hour budgets: each budgeted VC's limit, use and reservations."""

from datetime import UTC, datetime

from scheduler import GpuHourBudget as EngineBudget

from .ledger import vc_gpu_hours
from .models import GpuHourBudget


def engine_budgets(cluster, now):
    """{VC name: the engine's view of its budget} for the budgeted VCs of `cluster` at `now`
    (seconds since the epoch, the cycle's clock)."""
    budgets = list(GpuHourBudget.objects.filter(virtual_cluster__cluster=cluster).select_related("virtual_cluster"))
    if not budgets:
        return {}
    figures = vc_gpu_hours([b.virtual_cluster_id for b in budgets], datetime.fromtimestamp(now, UTC))
    return {
        b.virtual_cluster.name: EngineBudget(
            limit=b.gpu_hours_per_month,
            used=figures[b.virtual_cluster_id][0],
            period="this month",
            reserved=figures[b.virtual_cluster_id][1],
        )
        for b in budgets
    }
