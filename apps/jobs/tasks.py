"""django-q2 entry points of the jobs worker and the schedules that run them."""

from django.db import transaction

from .retention import delete_expired_jobs
from .worker.loop import run_scheduler

# The scheduler loop runs a little under a minute per task, and a schedule starts it
# every minute, so a qcluster always has one running; processes that do not hold the
# lease stand by inside it and take over within the lease's lifetime. Keep it under
# Q_CLUSTER's timeout.
SCHEDULER_LOOP_SECONDS = 55

SCHEDULES = {
    "jobs.scheduler_loop": ("apps.jobs.tasks.scheduler_loop", 1),
    "jobs.retention": ("apps.jobs.tasks.retention", 60),
}


def scheduler_loop():
    run_scheduler(duration=SCHEDULER_LOOP_SECONDS)


def retention():
    return delete_expired_jobs()


def ensure_schedules():
    """Create or correct the jobs schedules by name; running it again changes nothing."""
    from django_q.models import Schedule

    with transaction.atomic():
        for name, (func, minutes) in SCHEDULES.items():
            Schedule.objects.update_or_create(
                name=name,
                defaults={"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1},
            )
