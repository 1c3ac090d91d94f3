from django.apps import AppConfig

from pai import schedules


class MonitoringConfig(AppConfig):
    name = "apps.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self):
        from . import checks  # noqa: F401  (registers the deployment check of /metrics)

        schedules.ensure_after_migrate(self, "apps.monitoring.tasks")
