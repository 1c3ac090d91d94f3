from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_schedules(sender, using, **kwargs):
    from django.db import connections

    from .tasks import ensure_schedules

    # Skip partial migrations that leave django-q's tables out (e.g. `migrate django_q zero`).
    if using == "default" and "django_q_schedule" in connections[using].introspection.table_names():
        ensure_schedules()


class TenantsConfig(AppConfig):
    name = "apps.tenants"
    label = "tenants"
    verbose_name = "Tenants"

    def ready(self):
        # After migrate (when django-q's tables surely exist), not at import time.
        post_migrate.connect(_ensure_schedules, sender=self, dispatch_uid="tenants.ensure_schedules")
