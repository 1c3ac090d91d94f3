"""OpenPAI's "abnormal jobs": running jobs that ran too long or leave their GPUs idle.

A running job is abnormal when its current attempt has run for more than
`PAI_ABNORMAL_JOB_DAYS` days (default 5), or when it holds GPUs and every utilisation
sample for the last `PAI_ABNORMAL_GPU_MINUTES` minutes (default 10) was below
`PAI_ABNORMAL_GPU_PERCENT` % (default 10; `JobGpuUse.under_abnormal_since`, kept by the
worker's sampling). Platform admins see every such job, team admins their team's, other
users their own: the jobs each may stop.

- `abnormal_jobs(user)`: a list of `AbnormalJob` (the job, why, its figures), longest
  first, for pages (the portal);
- `abnormal_job_queryset(user)`: the same jobs as a queryset (the Django admin's list).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from apps.jobs.choices import JobState
from apps.jobs.models import Job


def _limits(now):
    return (
        now - timedelta(days=settings.PAI_ABNORMAL_JOB_DAYS),
        now - timedelta(minutes=settings.PAI_ABNORMAL_GPU_MINUTES),
    )


def abnormal_job_queryset(user, now=None):
    """The running jobs `user` may stop that are abnormal at `now`."""
    long_since, low_since = _limits(now or timezone.now())
    return Job.objects.manageable_by(user).filter(state=JobState.RUNNING).filter(
        Q(launched_at__lte=long_since)
        | Q(
            total_gpu__gt=0,
            gpu_use__under_abnormal_since__lte=low_since,
            gpu_use__sampled_at__gte=F("launched_at"),  # a sample of the running attempt
        )
    )


@dataclass(frozen=True)
class AbnormalJob:
    job: Job
    reasons: tuple[str, ...]
    running_seconds: float | None
    gpu_percent: float | None
    gpu_source: str | None
    low_gpu_since: datetime | None


def describe(job, now=None):
    """Why `job` is abnormal (an empty tuple when it is not), with its figures."""
    now = now or timezone.now()
    long_since, low_since = _limits(now)
    use = getattr(job, "gpu_use", None) if _has_gpu_use(job) else None
    reasons = []
    running = (now - job.launched_at).total_seconds() if job.launched_at else None
    if job.launched_at is not None and job.launched_at <= long_since:
        reasons.append(f"running for {running / 86400:.1f} days (more than {settings.PAI_ABNORMAL_JOB_DAYS:g})")
    current = use is not None and job.launched_at is not None and use.sampled_at >= job.launched_at
    low = use.under_abnormal_since if current else None
    if low is not None and low <= low_since and job.total_gpu > 0:
        minutes = (now - low).total_seconds() / 60
        reasons.append(
            f"GPU use below {settings.PAI_ABNORMAL_GPU_PERCENT:g} % for {minutes:.0f} minutes "
            f"(last sample {use.percent:.1f} %)"
        )
    return AbnormalJob(
        job=job, reasons=tuple(reasons), running_seconds=running,
        gpu_percent=use.percent if use is not None else None, gpu_source=use.source if use is not None else None,
        low_gpu_since=low,
    )


def _has_gpu_use(job):
    from .models import JobGpuUse

    try:
        job.gpu_use
    except JobGpuUse.DoesNotExist:
        return False
    return True


def abnormal_jobs(user, now=None, limit=500):
    """The abnormal running jobs `user` may stop, longest-running first, as `AbnormalJob`s
    (the job with its owner, VC and tenant loaded)."""
    now = now or timezone.now()
    jobs = (
        abnormal_job_queryset(user, now)
        .select_related("owner", "virtual_cluster", "tenant", "gpu_use")
        .defer("protocol_text", "spec", "launch")
        .order_by("launched_at", "pk")[:limit]
    )
    return [found for found in (describe(job, now) for job in jobs) if found.reasons]
