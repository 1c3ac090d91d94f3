"""Virtual cluster actions: create, change quotas, grant. Every one is atomic and audited."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

import scheduler
from apps.accounts.models import Group
from apps.audit.services import record
from apps.clusters.services import cluster_spec

from .capacity import forget_topology
from .models import PinnedCell, VirtualCluster, VirtualClusterCell, VirtualClusterGrant, quota_entry_name


def quota_entries(cells):
    """`cells` as (CellType, count, chain CellType or None): entries may omit the chain."""
    return [(entry[0], entry[1], entry[2] if len(entry) > 2 else None) for entry in cells]


def entry_problems(cluster, cells):
    """What is wrong with quota entries [(CellType, count[, chain])] on `cluster`, as
    [(index, field, message)], field one of "cell_type", "chain": a type or chain of another
    cluster, a chain that is no top-level cell type of the cluster or holds no such cells,
    an entry listed twice. Empty when each entry is well formed (whether the cluster can
    back them all is `validate_quotas`'s question)."""
    from apps.clusters.models import PhysicalCell

    problems, seen, tops = [], {}, None
    for index, (ct, _count, chain) in enumerate(quota_entries(cells)):
        if ct.cluster_id != cluster.pk:
            problems.append((index, "cell_type", f"Cell type {ct.name} belongs to another cluster."))
            continue
        if chain is not None:
            if chain.cluster_id != cluster.pk:
                problems.append((index, "chain", f"Cell type {chain.name} belongs to another cluster."))
                continue
            if tops is None:
                tops = set(
                    PhysicalCell.objects.filter(cluster=cluster, parent__isnull=True).values_list("cell_type_id", flat=True)
                )
            if chain.pk not in tops:
                problems.append((index, "chain", (
                    f"{chain.name} names no chain of cluster {cluster.name}: a chain is named by the cell type "
                    "of its top-level physical cells (a rack type, or a node type for standalone nodes)."
                )))
                continue
            inside, node = [], chain
            while node is not None:
                inside.append(node.pk)
                node = node.child
            if ct.pk not in inside:
                problems.append((index, "chain", f"Chain {chain.name} holds no {ct.name} cells."))
                continue
        key = (ct.pk, chain.pk if chain is not None else None)
        if key in seen:
            problems.append((index, "cell_type", f"{quota_entry_name(ct, chain)} is listed twice (entry {seen[key] + 1})."))
        seen.setdefault(key, index)
    return problems


def vc_spec(vc, cells=None, pinned_ids=None):
    """The engine's view of one VC; `cells` [(CellType, count[, chain])] and `pinned_ids`
    override stored rows. An entry with a chain reads ``CHAIN.TYPE``, as the engine and HiveD do."""
    if cells is None:
        cells = [(c.cell_type, c.count, c.chain) for c in vc.cells.select_related("cell_type", "chain")] if vc.pk else []
    counts = {}
    for ct, count, chain in quota_entries(cells):
        name = quota_entry_name(ct, chain)
        counts[name] = counts.get(name, 0) + count
    if pinned_ids is None:
        pinned_ids = (
            [p.physical_cell.pinned_id or p.physical_cell.address for p in vc.pinned_cells.select_related("physical_cell")]
            if vc.pk
            else []
        )
    return scheduler.VirtualClusterSpec(
        name=vc.name,
        cells=tuple(sorted(counts.items())),
        pinned_cells=tuple(sorted(pinned_ids)),
        cohort=vc.cohort or None,
        borrowing_limit=vc.borrowing_limit,
        lending_limit=vc.lending_limit,
        weight=vc.weight,
        max_leaf_cells_per_user=vc.max_leaf_cells_per_user,
        starvation_threshold=None if vc.starvation_threshold is None else float(vc.starvation_threshold),
    )


def validate_quotas(cluster, changed_vc=None, cells=None, pinned_ids=None):
    """Refuse a set of VCs the cluster's physical cells cannot back (HiveD's safety invariant).

    `changed_vc` (possibly unsaved) replaces its stored version with `cells`/`pinned_ids`.
    Raises ValidationError whose message names the cell type, level and shortfall.
    """
    specs = []
    for vc in VirtualCluster.objects.filter(cluster=cluster).order_by("name"):
        if changed_vc is not None and vc.pk == changed_vc.pk:
            continue
        specs.append(vc_spec(vc))
    if changed_vc is not None:
        specs.append(vc_spec(changed_vc, cells, pinned_ids))
    try:
        scheduler.validate_configuration(cluster_spec(cluster), specs)
    except scheduler.ConfigurationError as exc:
        if changed_vc is None:
            raise ValidationError(str(exc), code="quota") from exc
        # The engine names the level that runs short, which may be another VC's: say what
        # the changed VC asks beyond what is free, and who holds the rest.
        from .quotas import refusal_message

        raise ValidationError(refusal_message(cluster, changed_vc, cells, pinned_ids, exc), code="quota") from exc


def check_shrink(vc, cells, pinned_ids=None):
    """Refuse a quota below what the VC's running jobs hold, naming them (ValidationError,
    code "shrink"); the caller confirms by not calling this."""
    from .quotas import jobs_losing_guarantee, shrink_message

    affected = jobs_losing_guarantee(vc.cluster, vc, cells, pinned_ids)
    if affected:
        raise ValidationError(shrink_message(vc, affected), code="shrink")


def _pinned_id(physical_cell):
    return physical_cell.pinned_id or physical_cell.address


def _cells_summary(vc):
    return sorted(str(c) for c in vc.cells.select_related("cell_type", "chain"))


def _cell_rows(vc, cells):
    return [
        VirtualClusterCell(virtual_cluster=vc, cell_type=ct, count=count, chain=chain)
        for ct, count, chain in quota_entries(cells)
    ]


def check_entries(cluster, cells):
    problems = entry_problems(cluster, cells)
    if problems:
        raise ValidationError({"cells": [message for _index, _field, message in problems]}, code="cells")


@transaction.atomic
def create_virtual_cluster(actor, *, tenant, cluster, name, cells, pinned_cells=(), **options):
    """Create a VC with its cells. In basic auth mode its same-named group comes with it (OpenPAI's rule)."""
    vc = VirtualCluster(tenant=tenant, cluster=cluster, name=name, **options)
    vc.full_clean()
    check_entries(cluster, cells)
    validate_quotas(cluster, vc, list(cells), [_pinned_id(p) for p in pinned_cells])
    vc.save()
    VirtualClusterCell.objects.bulk_create(_cell_rows(vc, cells))
    PinnedCell.objects.bulk_create([PinnedCell(virtual_cluster=vc, physical_cell=p) for p in pinned_cells])
    forget_topology()  # bulk_create sends no post_save
    record(actor, "virtualcluster.create", vc, changes={"cells": _cells_summary(vc), "cluster": cluster.name})
    after_virtual_cluster_created(actor, vc)
    return vc


def after_virtual_cluster_created(actor, vc):
    """Basic mode: a new VC brings its same-named group, granted the VC. OIDC mode: nothing."""
    if settings.PAI_AUTH_MODE != "basic":
        return None
    group, created = Group.objects.get_or_create(
        name=vc.name, defaults={"tenant": vc.tenant, "description": f"Users of virtual cluster {vc.name}."}
    )
    if created:
        record(actor, "group.create", group, changes={"reason": f"basic mode: created with VC {vc.name}"})
    if group.tenant_id == vc.tenant_id:
        grant_virtual_cluster(actor, vc, group)
    return group


@transaction.atomic
def set_quota(actor, vc, cells, pinned_cells=None, *, confirm_shrink=False):
    """Replace a VC's cells (and pinned cells when given), refusing what the cluster cannot
    back, and, unless `confirm_shrink`, a quota below what its running jobs hold."""
    pinned_ids = None if pinned_cells is None else [_pinned_id(p) for p in pinned_cells]
    check_entries(vc.cluster, cells)
    validate_quotas(vc.cluster, vc, list(cells), pinned_ids)
    if not confirm_shrink:
        check_shrink(vc, list(cells), pinned_ids)
    before = _cells_summary(vc)
    vc.cells.all().delete()
    VirtualClusterCell.objects.bulk_create(_cell_rows(vc, cells))
    if pinned_cells is not None:
        vc.pinned_cells.all().delete()
        PinnedCell.objects.bulk_create([PinnedCell(virtual_cluster=vc, physical_cell=p) for p in pinned_cells])
    forget_topology()  # bulk_create sends no post_save
    record(actor, "virtualcluster.quota", vc, changes={"cells": [before, _cells_summary(vc)]})
    return vc


@transaction.atomic
def set_starvation_threshold(actor, vc, seconds):
    """How long the VC's guaranteed jobs wait before they hold a reservation (``None``: the
    scheduler's default); audited when it changes."""
    before = vc.starvation_threshold
    if before == seconds:
        return vc
    vc.starvation_threshold = seconds
    vc.full_clean(validate_unique=False, validate_constraints=False)
    vc.save(update_fields=["starvation_threshold"])
    record(actor, "virtualcluster.starvation_threshold", vc, changes={"starvation_threshold": [before, seconds]})
    return vc


@transaction.atomic
def grant_virtual_cluster(actor, vc, group):
    grant, created = VirtualClusterGrant.objects.get_or_create(virtual_cluster=vc, group=group)
    if created:
        record(actor, "virtualcluster.grant", vc, changes={"group": group.name})
    return grant
