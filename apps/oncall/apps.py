from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_schedules(sender, using, **kwargs):
    from .tasks import ensure_schedules

    if using == "default":
        ensure_schedules()


class OncallConfig(AppConfig):
    name = "apps.oncall"
    label = "oncall"
    verbose_name = "On-call"

    def ready(self):
        # After migrate (when django-q's tables surely exist), not at import time.
        post_migrate.connect(_ensure_schedules, sender=self, dispatch_uid="oncall.ensure_schedules")
