from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def check_metrics_token(app_configs=None, **kwargs):
    if settings.PRODUCTION and not settings.PAI_METRICS_TOKEN:
        return [checks.Warning(
            "PAI_METRICS_TOKEN is not set: /metrics answers 403 until it is.",
            hint="Set PAI_METRICS_TOKEN and give Prometheus the same bearer token (the Helm chart's ServiceMonitor does).",
            id="pai.W101",
        )]
    return []
