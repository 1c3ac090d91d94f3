"""Retention: completed jobs older than their tenant's retention are deleted, with their pods' logs.

A compact accounting row (`JobUsage`) is kept per deleted job for usage reports.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from apps.tenants.models import Tenant
from scheduler.backends import PodConflictError

from .choices import COMPLETED_STATES
from .models import Job, JobUsage, TaskAttempt
from .worker.backends import backend_for

log = logging.getLogger(__name__)


def gpu_hours(job):
    seconds = 0.0
    for attempt in job.attempts.exclude(launched_at__isnull=True).exclude(completed_at__isnull=True):
        seconds += (attempt.completed_at - attempt.launched_at).total_seconds()
    return round(job.cell_gpu * seconds / 3600, 4)


def expired_jobs(now=None):
    """Completed jobs past their tenant's retention, oldest first (one query per tenant)."""
    now = now or timezone.now()
    jobs = Job.objects.none()
    for tenant_id, days in Tenant.objects.values_list("pk", "job_retention_days"):
        jobs = jobs | Job.objects.filter(
            tenant_id=tenant_id, state__in=COMPLETED_STATES, completed_at__lt=now - timedelta(days=days)
        )
    return jobs.select_related("owner", "tenant", "virtual_cluster__cluster").order_by("completed_at", "pk")


def delete_expired_jobs(now=None, batch=500):
    """Delete expired jobs (and what their backends keep of their pods). Returns how many."""
    deleted = 0
    backends = {}
    try:
        for job in list(expired_jobs(now)[:batch]):
            cluster = job.virtual_cluster.cluster
            if cluster.pk not in backends:
                try:
                    backends[cluster.pk] = backend_for(cluster)
                except Exception:
                    log.exception("cluster %s: backend unavailable; its jobs wait", cluster.name)
                    backends[cluster.pk] = None
            backend = backends[cluster.pk]
            if backend is None:
                continue
            pods = TaskAttempt.objects.filter(task__job_attempt__job=job).exclude(pod_name="")
            for name in pods.values_list("pod_name", flat=True):
                # Completed pods are kept (with their logs) until now; delete, then forget them.
                backend.delete_pod(name)
                try:
                    backend.forget_pod(name)
                except PodConflictError:
                    break  # still stopping: the next run finishes it
            else:
                _delete(job)
                deleted += 1
    finally:
        for backend in backends.values():
            if backend is not None:
                backend.close()
    return deleted


@transaction.atomic
def _delete(job):
    JobUsage.objects.update_or_create(
        job_id=job.pk,
        defaults={
            "username": job.owner.username,
            "job_name": job.name,
            "tenant": job.tenant,
            "virtual_cluster": job.virtual_cluster.name,
            "state": job.state,
            "gpu_hours": gpu_hours(job),
            "submitted_at": job.submitted_at,
            "launched_at": job.launched_at,
            "completed_at": job.completed_at,
        },
    )
    record(None, "job.retention.delete", job, changes={"completedAt": job.completed_at.isoformat()})
    job.delete()
