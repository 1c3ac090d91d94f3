from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_schedules(sender, using, **kwargs):
    from django.db import connections

    from .tasks import ensure_schedules

    if using == "default" and "django_q_schedule" in connections[using].introspection.table_names():
        ensure_schedules()


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from . import checks  # noqa: F401  (registers them)
        from .api import throttles  # noqa: F401  (its receiver keeps the tenants' rates fresh)

        post_migrate.connect(_ensure_schedules, sender=self, dispatch_uid="jobs.ensure_schedules")
