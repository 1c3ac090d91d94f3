from django.apps import AppConfig


class VirtualclustersConfig(AppConfig):
    name = "apps.virtualclusters"
    label = "virtualclusters"
    verbose_name = "Virtual clusters"

    def ready(self):
        from . import signals

        signals.connect()
