from django.apps import AppConfig

from pai import schedules


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from . import checks  # noqa: F401  (registers them)
        from .api import throttles  # noqa: F401  (its receiver keeps the tenants' rates fresh)

        schedules.ensure_after_migrate(self, "apps.jobs.tasks")
