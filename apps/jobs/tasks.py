"""django-q2 entry points of the jobs worker and the schedules that run them."""

import time

from pai import schedules

from . import notifications
from .retention import delete_expired_jobs
from .worker.loop import run_scheduler

# The scheduler loop runs as a chain of tasks, each a little under a minute (below
# Q_CLUSTER's timeout): a leader that is done starts its successor before it gives the
# lease up. A schedule starts one every minute as a safety net; it stands by for a few
# seconds and returns when another process leads, so idle standbys never pile up.
SCHEDULER_LOOP_SECONDS = 55
STANDBY_SECONDS = 10

SCHEDULES = {
    "jobs.scheduler_loop": ("apps.jobs.tasks.scheduler_loop", 1),
    "jobs.retention": ("apps.jobs.tasks.retention", 60),
    "jobs.notifications": ("apps.jobs.tasks.resend_job_notifications", 5),
}


def scheduler_loop():
    run_scheduler(duration=SCHEDULER_LOOP_SECONDS, standby=STANDBY_SECONDS, handover=_start_successor)


def _start_successor():
    from django_q.tasks import async_task

    async_task("apps.jobs.tasks.scheduler_loop", task_name="jobs.scheduler_loop.successor")


def retention():
    return delete_expired_jobs()


def send_job_notification(pk):
    return notifications.send(pk)


def resend_job_notifications():
    return notifications.resend_unsent()


def ensure_schedules():
    """Create or correct the jobs schedules by name; running it again changes nothing."""
    schedules.ensure(SCHEDULES)


KICK_WINDOW_SECONDS = 10
_kicked = {"until": 0.0}


def kick():
    """Start a scheduler loop now unless one leads already: after a submit or a stop, so that
    the job need not wait for the next scheduled loop. A burst of submits starts one loop."""
    from django.core.cache import cache
    from django_q.tasks import async_task

    from .worker.lease import current_holder

    # This process's clock first, then the shared cache: within a window a burst of
    # submits costs no query at all, and from one web process no cache round trip either.
    now = time.monotonic()
    if now < _kicked["until"]:
        return
    _kicked["until"] = now + KICK_WINDOW_SECONDS
    if cache.add("pai:scheduler-kick", 1, KICK_WINDOW_SECONDS) and current_holder() is None:
        async_task("apps.jobs.tasks.scheduler_loop", task_name="jobs.scheduler_loop.kick")
