from django.apps import AppConfig

from pai import schedules


class TenantsConfig(AppConfig):
    name = "apps.tenants"
    label = "tenants"
    verbose_name = "Tenants"

    def ready(self):
        # After migrate (when django-q's tables surely exist), not at import time.
        schedules.ensure_after_migrate(self, "apps.tenants.tasks")
