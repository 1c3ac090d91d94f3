"""The django-q2 schedules the apps declare, kept in the database by name.

Each app's ``tasks.SCHEDULES`` maps a schedule's name to (dotted function, every N
minutes). After ``migrate`` they are created or corrected; running that again writes
nothing. A schedule changed by hand (in the admin) is put back to what the code says.
"""

from django.db import connections, transaction
from django.db.models.signals import post_migrate
from django.utils.module_loading import import_string


def ensure(schedules):
    """Create the missing schedules and correct the changed ones; the others are not written."""
    from django_q.models import Schedule

    with transaction.atomic():
        existing = {}
        for schedule in Schedule.objects.select_for_update().filter(name__in=list(schedules)).order_by("-pk"):
            existing[schedule.name] = schedule  # names are not unique in django-q's table: the oldest counts
        for name, (func, minutes) in schedules.items():
            wanted = {"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1}
            schedule = existing.get(name)
            if schedule is None:
                Schedule.objects.create(name=name, **wanted)
            elif any(getattr(schedule, field) != value for field, value in wanted.items()):
                for field, value in wanted.items():
                    setattr(schedule, field, value)
                schedule.save()


def ensure_after_migrate(app_config, tasks_module):
    """Have `tasks_module`'s ``ensure_schedules`` run after each ``migrate`` of the default
    database, once django-q's tables exist (a partial migration such as ``migrate django_q
    zero`` leaves them out)."""

    def receiver(sender, using, **kwargs):
        if using == "default" and "django_q_schedule" in connections[using].introspection.table_names():
            import_string(f"{tasks_module}.ensure_schedules")()

    post_migrate.connect(receiver, sender=app_config, weak=False, dispatch_uid=f"{app_config.label}.ensure_schedules")
