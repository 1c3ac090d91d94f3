"""Job summaries for the list route, built from plain rows.

The list is the hottest read of the API (every client polls it), so a page is two
queries of plain values, not model instances run through DRF fields;
`JobSummarySerializer` documents the same shape and a test keeps the two in step.
"""

from ..models import JobTag
from ..models.job import framework_debug_id
from .serializers import epoch_ms

_COLUMNS = (
    "id", "name", "owner__username", "virtual_cluster__name", "state", "sub_state", "execution_type", "retries",
    "retries_user", "retries_platform", "retries_resource", "submitted_at", "created_at", "launched_at",
    "completed_at", "app_exit_code", "total_gpu", "total_tasks", "total_task_roles", "priority_class",
)


def job_summaries(jobs, user):
    """OpenPAI's JobSummary rows for a (sliced) job queryset, in its order."""
    rows = list(jobs.values(*_COLUMNS))
    tags = {}
    if rows:
        page_tags = JobTag.objects.visible_to(user).filter(job_id__in=[r["id"] for r in rows])
        for job_id, name in page_tags.values_list("job_id", "name"):
            tags.setdefault(job_id, []).append(name)
    return [_summary(row, sorted(tags.get(row["id"], []))) for row in rows]


def _summary(row, tags):
    username, name = row["owner__username"], row["name"]
    return {
        "name": name,
        "username": username,
        "state": row["state"],
        "subState": row["sub_state"],
        "executionType": row["execution_type"],
        "tags": tags,
        "retries": row["retries"],
        "retryDetails": {
            "user": row["retries_user"], "platform": row["retries_platform"], "resource": row["retries_resource"],
        },
        "retryDelayTime": None,
        "submissionTime": epoch_ms(row["submitted_at"]),
        "createdTime": epoch_ms(row["created_at"] or row["submitted_at"]),
        "launchedTime": epoch_ms(row["launched_at"]),
        "completedTime": epoch_ms(row["completed_at"]),
        "appExitCode": row["app_exit_code"],
        "virtualCluster": row["virtual_cluster__name"],
        "totalGpuNumber": row["total_gpu"],
        "totalTaskNumber": row["total_tasks"],
        "totalTaskRoleNumber": row["total_task_roles"],
        "jobPriority": row["priority_class"],
        "debugId": framework_debug_id(f"{username}~{name}"),
    }
