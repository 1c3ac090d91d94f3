"""Invalidate the cached submit limits (`capacity.submit_limits`) when cells change."""

from django.db.models.signals import post_delete, post_save

from .capacity import forget_topology

# What a VC's SKUs and leaf cells are computed from.
TOPOLOGY_MODELS = (
    "clusters.CellType",
    "clusters.PhysicalCell",
    "virtualclusters.VirtualCluster",
    "virtualclusters.VirtualClusterCell",
    "virtualclusters.PinnedCell",
)


def _forget(sender, **kwargs):
    forget_topology()


def connect():
    from django.apps import apps

    for label in TOPOLOGY_MODELS:
        model = apps.get_model(label)
        post_save.connect(_forget, sender=model, dispatch_uid=f"pai-topology-save-{label}")
        post_delete.connect(_forget, sender=model, dispatch_uid=f"pai-topology-delete-{label}")
