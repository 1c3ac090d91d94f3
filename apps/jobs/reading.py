"""What the API and the portal's pages read about a job: its task attempts' logs and how it ended.

A task attempt's log is the file the backend writes inside `PAI_DATA_DIR` while the pod
lives, else the end of it the worker kept (`TaskLog`) when the pod ended.
"""

from pathlib import Path

from django.conf import settings

from scheduler import exitcodes

from .models import TaskLog

LOG_TAIL_BYTES = 16 * 1024


def log_file(task_attempt):
    """The task attempt's log file, if the backend has written one inside pai's data directory."""
    if not task_attempt.log_path:
        return None
    path = Path(task_attempt.log_path).resolve()
    root = Path(settings.PAI_DATA_DIR).resolve()
    if root not in path.parents or not path.is_file():
        return None
    return path


def kept_log(task_attempt):
    """The end of the log the worker kept when the pod ended (a backend that forgets it with the pod)."""
    return TaskLog.objects.filter(pk=task_attempt.pk).values_list("text", flat=True).first()


def has_log(task_attempt):
    return log_file(task_attempt) is not None or kept_log(task_attempt) is not None


def read_log(task_attempt, offset=None, tail=None, limit=None):
    """(bytes, size) of the task attempt's log, or None when it has none yet.

    `tail`: only the last `tail` bytes; `offset`: from that byte on (a follower's next
    read), at most `limit` bytes. `size` is the whole log's length, the next offset.
    """
    path = log_file(task_attempt)
    if path is None:
        kept = kept_log(task_attempt)
        if kept is None:
            return None
        data = kept.encode()
        size = len(data)
        start = _start(size, offset, tail)
        end = size if limit is None else min(size, start + limit)
        return data[start:end], size
    with path.open("rb") as handle:
        size = path.stat().st_size
        start = _start(size, offset, tail)
        handle.seek(start)
        return handle.read(-1 if limit is None else min(limit, max(0, size - start))), size


def _start(size, offset, tail):
    if offset is not None:
        return min(max(0, offset), size)
    if tail is not None:
        return max(0, size - tail)
    return 0


def exit_of(job, attempt):
    """(code, spec row code, diagnostics, trigger message) of how the attempt ended; for a job
    that ended without an attempt (refused by the scheduler, stopped while queued), the job's."""
    if attempt is not None:
        return attempt.exit_code, attempt.exit_spec_code, attempt.exit_diagnostics, attempt.exit_trigger_message
    if job.app_exit_code is None:
        return None, None, "", ""
    if job.app_exit_code == exitcodes.STOP_REQUESTED:
        return job.app_exit_code, None, "The job was stopped before it was placed.", "stopped by the user"
    return job.app_exit_code, None, job.wait_reason, job.wait_reason
