from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_schedules(sender, using, **kwargs):
    from django.db import connections

    from .tasks import ensure_schedules

    if using == "default" and "django_q_schedule" in connections[using].introspection.table_names():
        ensure_schedules()


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self):
        from . import checks  # noqa: F401  (registers the deployment check of /metrics)

        post_migrate.connect(_ensure_schedules, sender=self, dispatch_uid="monitoring.ensure_schedules")
