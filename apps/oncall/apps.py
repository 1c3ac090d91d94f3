from django.apps import AppConfig


class OncallConfig(AppConfig):
    name = "apps.oncall"
    label = "oncall"
    verbose_name = "On-call"
