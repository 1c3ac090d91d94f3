from django.apps import AppConfig


class VirtualclustersConfig(AppConfig):
    name = "apps.virtualclusters"
    label = "virtualclusters"
    verbose_name = "Virtual clusters"
