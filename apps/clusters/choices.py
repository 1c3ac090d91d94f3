from django.db import models


class ClusterClass(models.TextChoices):
    PRODUCTION = "production", "Production"
    NON_PRODUCTION = "non-production", "Non-production"


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local (processes on this machine)"
    KUBERNETES = "kubernetes", "Kubernetes"
