"""The usage ledger: what each job attempt used, by SKU and calendar month.

An attempt holds its cells from its placement (the attempt's creation) to its end. When
it ends, `record_attempts` writes one `UsageRecord` per SKU and month, inside the
transaction that completes the attempt, so it is written exactly once. Attempts still
running are accounted on the fly (`running_pieces`): reports and budgets add what they
have used so far.

Months are calendar months in pai's time zone (`TIME_ZONE`).
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Sum
from django.utils import timezone

from apps.clusters.models import CellType
from apps.jobs.models import Job, JobAttempt

from .models import UsageRecord


def month_start(moment):
    """The first instant of `moment`'s calendar month, in pai's time zone."""
    local = timezone.localtime(moment)
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(start):
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return timezone.make_aware(datetime(year, month, 1), start.tzinfo)


def month_pieces(start, end):
    """[(month's first day, piece start, piece end)] of the interval, split at month ends."""
    pieces = []
    current = month_start(start)
    while current < end:
        following = next_month(current)
        begin, finish = max(start, current), min(end, following)
        if finish > begin:
            pieces.append((current.date(), begin, finish))
        current = following
    return pieces


def _resources(cluster_ids):
    """{(cluster id, SKU name): (GPUs, CPUs) of one leaf cell}."""
    return {
        (cluster_id, name): (gpu, cpu)
        for cluster_id, name, gpu, cpu in CellType.objects.filter(
            cluster_id__in=cluster_ids, child__isnull=True
        ).values_list("cluster_id", "name", "gpu", "cpu")
    }


@dataclass(frozen=True)
class Piece:
    """One SKU of one attempt over one month (a ledger row, or an open attempt so far)."""

    job: dict
    attempt_index: int
    sku: str
    gpus: int
    cpus: float
    month: object
    started_at: datetime
    ended_at: datetime
    attempt_started_at: datetime

    @property
    def hours(self):
        return (self.ended_at - self.started_at).total_seconds() / 3600

    def record(self):
        job = self.job
        return UsageRecord(
            tenant_id=job["tenant_id"], virtual_cluster_id=job["virtual_cluster_id"],
            vc_name=job["virtual_cluster__name"], user_id=job["owner_id"], username=job["owner__username"],
            cluster_name=job["virtual_cluster__cluster__name"], job_id=job["pk"], job_name=job["name"],
            attempt_index=self.attempt_index, priority_class=job["priority_class"], sku=self.sku, gpus=self.gpus,
            cpus=self.cpus, month=self.month, started_at=self.started_at, ended_at=self.ended_at,
            gpu_hours=self.gpus * self.hours, cpu_hours=self.cpus * self.hours,
        )


JOB_FIELDS = (
    "pk", "name", "leaf_cells", "priority_class", "tenant_id", "owner_id", "owner__username", "virtual_cluster_id",
    "virtual_cluster__name", "virtual_cluster__cluster_id", "virtual_cluster__cluster__name",
)


def _pieces(spans):
    """Pieces of `spans`: (job values, attempt index, start, end)."""
    spans = list(spans)
    resources = _resources({job["virtual_cluster__cluster_id"] for job, *_ in spans})
    for job, index, start, end in spans:
        if start is None or end is None or end <= start:
            continue
        for sku, cells in sorted((job["leaf_cells"] or {}).items()):
            gpu, cpu = resources.get((job["virtual_cluster__cluster_id"], sku), (0, 0.0))
            for month, begin, finish in month_pieces(start, end):
                yield Piece(job, index, sku, gpu * int(cells), cpu * int(cells), month, begin, finish, start)


def record_attempts(attempts, ended_at):
    """Write the ledger rows of attempts that just ended (call inside their completion's
    transaction). Attempts never placed held nothing; a row already written stays."""
    placed = [a for a in attempts if a.created_at is not None]
    if not placed:
        return
    jobs = {job["pk"]: job for job in Job.objects.filter(pk__in={a.job_id for a in placed}).values(*JOB_FIELDS)}
    spans = ((jobs[a.job_id], a.index, a.created_at, ended_at) for a in placed if a.job_id in jobs)
    UsageRecord.objects.bulk_create([piece.record() for piece in _pieces(spans)], ignore_conflicts=True)


def running_pieces(now, **job_filters):
    """Pieces of the attempts still holding cells, from their placement to `now`."""
    attempts = (
        JobAttempt.objects.filter(completed_at__isnull=True, job__placement__isnull=False, **{
            f"job__{key}": value for key, value in job_filters.items()
        })
        .values_list("job_id", "index", "created_at")
    )
    attempts = list(attempts)
    jobs = {job["pk"]: job for job in Job.objects.filter(pk__in={a[0] for a in attempts}).values(*JOB_FIELDS)}
    return list(_pieces((jobs[job_id], index, created, now) for job_id, index, created in attempts if job_id in jobs))


def vc_gpu_hours(vc_ids, now):
    """{VC id: (GPU-hours used this month, GPU-hours running jobs still hold of their first hour)}."""
    month = month_start(now)
    used = dict(
        UsageRecord.objects.filter(virtual_cluster_id__in=vc_ids, month=month.date())
        .values_list("virtual_cluster_id")
        .annotate(total=Sum("gpu_hours"))
        .order_by()
    )
    reserved = {}
    for piece in running_pieces(now, virtual_cluster_id__in=vc_ids):
        if piece.month != month.date():
            continue
        vc_id = piece.job["virtual_cluster_id"]
        used[vc_id] = used.get(vc_id, 0.0) + piece.gpus * piece.hours
        # A running job counts for at least its first hour, as its admission did.
        held = (now - piece.attempt_started_at).total_seconds() / 3600
        reserved[vc_id] = reserved.get(vc_id, 0.0) + piece.gpus * max(0.0, 1.0 - held)
    return {vc_id: (used.get(vc_id, 0.0), reserved.get(vc_id, 0.0)) for vc_id in vc_ids}
