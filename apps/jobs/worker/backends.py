"""The cluster backend behind a Cluster row."""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from apps.clusters.choices import BackendKind
from apps.clusters.models import Node
from scheduler.backends.local import LocalBackend


def local_state_dir(cluster):
    return settings.PAI_DATA_DIR / "clusters" / cluster.name


def local_nodes(cluster):
    """The local backend's virtual nodes are the cluster's Node rows (capacity and health)."""
    return [
        {
            "name": node.name,
            "gpu": node.gpu_capacity,
            "cpu": node.cpu_capacity or 1,
            "memory_mb": node.memory_mb_capacity or 1024,
            "ip": node.ip or "127.0.0.1",
            "labels": {str(k): str(v) for k, v in (node.labels or {}).items()},
            "ready": node.ready,
            "schedulable": node.schedulable,
        }
        for node in Node.objects.filter(cluster=cluster).order_by("name")
    ]


def backend_for(cluster):
    if cluster.backend == BackendKind.LOCAL:
        return LocalBackend(local_state_dir(cluster), local_nodes(cluster))
    raise ImproperlyConfigured(
        f"Cluster {cluster.name}: the {cluster.get_backend_display()} backend is not available in this version; "
        "use the local backend."
    )
