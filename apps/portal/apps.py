from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The researchers' web pages: home, job list and detail, submission, VC and cluster pages."""

    name = "apps.portal"
    label = "portal"
    verbose_name = "Portal"
