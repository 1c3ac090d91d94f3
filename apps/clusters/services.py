"""Cluster actions, and the translation of a cluster's rows into the engine's configuration."""

import logging
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from scheduler.spec import CellTypeSpec, ClusterSpec, PhysicalCellSpec, SkuSpec

from .models import CellType, Node, PhysicalCell


def cluster_spec(cluster):
    """The engine's view of a cluster: SKUs, cell types and the tree of physical cells."""
    cell_types = list(CellType.objects.filter(cluster=cluster).order_by("name"))
    by_id = {ct.pk: ct for ct in cell_types}
    skus = tuple(
        SkuSpec(name=ct.name, gpu=ct.gpu, cpu=ct.cpu, memory_mb=ct.memory_mb) for ct in cell_types if ct.is_leaf
    )
    types = tuple(
        CellTypeSpec(name=ct.name, child=by_id[ct.child_id].name, child_count=ct.child_count, is_node=ct.is_node_level)
        for ct in cell_types
        if not ct.is_leaf
    )
    cells = list(PhysicalCell.objects.filter(cluster=cluster).order_by("address"))
    children = {}
    for cell in cells:
        children.setdefault(cell.parent_id, []).append(cell)

    def build(cell):
        return PhysicalCellSpec(
            cell_type=by_id[cell.cell_type_id].name,
            address=cell.address,
            children=tuple(build(child) for child in children.get(cell.pk, ())),
            pinned_id=cell.pinned_id or None,
        )

    return ClusterSpec(skus=skus, cell_types=types, physical_cells=tuple(build(c) for c in children.get(None, ())))


@transaction.atomic
def set_node_health(node, *, ready, schedulable, actor=None):
    """Record a node's health as the backend reports it; audited when it changes."""
    before = (node.ready, node.schedulable)
    node.ready, node.schedulable = ready, schedulable
    if before != (ready, schedulable):
        Node.objects.filter(pk=node.pk).update(ready=ready, schedulable=schedulable)
        record(
            actor,
            "node.health",
            node,
            changes={"ready": [before[0], ready], "schedulable": [before[1], schedulable]},
        )
    return node


def record_api_status(cluster, availability):
    """Show whether the cluster's API answers (a backend's `Availability`); audited when it changes.

    Written only on a change: the worker calls this every cycle of every cluster.
    """
    error = "" if availability.available else availability.reason[:2000]
    if (cluster.api_available, cluster.api_error) == (availability.available, error):
        return
    since = None
    if not availability.available:
        since = datetime.fromtimestamp(availability.since, UTC) if availability.since else timezone.now()
    if cluster.api_available != availability.available:
        log = logging.getLogger(__name__)
        if availability.available:
            log.warning("cluster %s: the API answers again", cluster.name)
        else:
            log.warning("cluster %s: API unavailable: %s", cluster.name, error)
        record(
            None, "cluster.api_status", cluster,
            changes={"api_available": [cluster.api_available, availability.available], "api_error": error},
        )
    cluster.api_available, cluster.api_error = availability.available, error
    cluster.api_unavailable_since = since if not availability.available else None
    type(cluster).objects.filter(pk=cluster.pk).update(
        api_available=cluster.api_available, api_error=error, api_unavailable_since=cluster.api_unavailable_since
    )


def _audit_value(value):
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


@transaction.atomic
def save_inventory_row(actor, row, fields):
    """Create or change a cluster, cell type or physical cell from the API: validated, audited.

    `fields` maps field names to new values; `row` is unsaved for a creation.
    """
    from apps.audit.services import model_diff

    creating = row.pk is None
    before = {} if creating else {name: _audit_value(getattr(row, name)) for name in fields}
    for name, value in fields.items():
        setattr(row, name, value)
    row.full_clean()
    row.save()
    after = {name: _audit_value(getattr(row, name)) for name in fields}
    action = f"{row._meta.model_name}.{'create' if creating else 'update'}"
    record(actor, action, row, changes=model_diff(before, after))
    return row


@transaction.atomic
def delete_inventory_row(actor, row):
    """Delete a cluster, cell type or physical cell; raises ProtectedError while VCs or cells use it."""
    record(actor, f"{row._meta.model_name}.delete", row, changes={"name": str(row)})
    row.delete()
