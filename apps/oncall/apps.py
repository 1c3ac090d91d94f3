from django.apps import AppConfig

from pai import schedules


class OncallConfig(AppConfig):
    name = "apps.oncall"
    label = "oncall"
    verbose_name = "On-call"

    def ready(self):
        # After migrate (when django-q's tables surely exist), not at import time.
        schedules.ensure_after_migrate(self, "apps.oncall.tasks")
