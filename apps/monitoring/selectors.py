"""Reading the efficiency figures for the API and pages."""

from django.conf import settings

from .models import JobGpuUse, TaskUtilization


def _ms(value):
    return int(value.timestamp() * 1000) if value is not None else None


def _round(value):
    return round(value, 2) if value is not None else None


def job_efficiency(job, attempt, tags):
    """The job detail's `gpuEfficiency` (an extra field beside OpenPAI's): the job's
    utilisation and the idle-GPU rule's view of it, and each task's figures, for `attempt`.
    `tags` are the job's tags; `job.gpu_use` is best selected with the job (no sample, no
    query)."""
    tenant = job.tenant
    body = {
        "idleRule": {
            "thresholdPercent": tenant.idle_gpu_threshold_percent,
            "hours": tenant.idle_gpu_hours,
            "graceHours": tenant.idle_gpu_grace_hours,
            "action": tenant.idle_gpu_action,
            "exemptTag": settings.PAI_IDLE_GPU_EXEMPT_TAG,
            "exempt": settings.PAI_IDLE_GPU_EXEMPT_TAG in tags,
        },
        "source": None, "percent": None, "averagePercent": None, "samples": 0, "sampledTime": None,
        "idleSinceTime": None, "warnedTime": None, "actionTime": None, "tasks": [],
    }
    try:
        use = job.gpu_use
    except JobGpuUse.DoesNotExist:
        use = None
    if attempt is None or use is None:
        return body  # never sampled: no task was either
    if use.attempt_index == attempt.index:
        body.update(
            source=use.source, percent=_round(use.percent), averagePercent=_round(use.average_percent),
            samples=use.samples, sampledTime=_ms(use.sampled_at), idleSinceTime=_ms(use.low_since),
            warnedTime=_ms(use.warned_at), actionTime=_ms(use.escalated_at),
        )
    rows = (
        TaskUtilization.objects.filter(task_attempt__task__job_attempt=attempt)
        .select_related("task_attempt__task")
        .order_by("task_attempt__task__task_role", "task_attempt__task__index", "task_attempt__index")
    )
    body["tasks"] = [
        {
            "taskRoleName": row.task_attempt.task.task_role,
            "taskIndex": row.task_attempt.task.index,
            "taskAttemptIndex": row.task_attempt.index,
            "source": row.source,
            "percent": _round(row.percent),
            "averagePercent": _round(row.average_percent),
            "samples": row.samples,
            "firstSampledTime": _ms(row.first_sampled_at),
            "lastSampledTime": _ms(row.last_sampled_at),
        }
        for row in rows
    ]
    return body
