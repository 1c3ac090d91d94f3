"""What a VC's cells amount to, in leaf cells and in OpenPAI's {cpu, memory, gpu} units."""

from collections import defaultdict

from apps.clusters.topology import CellChains


def guaranteed_leaf_cells(vc, chains=None):
    """Leaf cells the VC is guaranteed, per SKU (leaf cell type name), pinned cells included."""
    chains = chains or CellChains.for_cluster(vc.cluster)
    totals = defaultdict(int)
    for cell in vc.cells.all():
        ct = chains.by_id[cell.cell_type_id]
        totals[chains.leaf(ct).name] += cell.count * chains.leaf_count(ct)
    # .all() (not .select_related()) so that a caller's prefetch_related("pinned_cells__physical_cell") is used.
    for pinned in vc.pinned_cells.all():
        ct = chains.by_id[pinned.physical_cell.cell_type_id]
        totals[chains.leaf(ct).name] += chains.leaf_count(ct)
    return dict(sorted(totals.items()))


def resources_of_leaf_cells(leaf_cells_by_sku, chains):
    """OpenPAI's resource triple for a number of leaf cells per SKU (memory in MB)."""
    cpu = memory = gpu = 0
    for sku_name, count in leaf_cells_by_sku.items():
        sku = chains.by_name[sku_name]
        cpu += sku.cpu * count
        memory += sku.memory_mb * count
        gpu += sku.gpu * count
    return {"cpu": cpu, "memory": memory, "gpu": gpu}


def cluster_leaf_cells(cluster, chains=None):
    """Leaf cells per SKU of every physical cell of the cluster."""
    from apps.clusters.models import PhysicalCell

    chains = chains or CellChains.for_cluster(cluster)
    totals = defaultdict(int)
    for cell_type_id in PhysicalCell.objects.filter(cluster=cluster, parent__isnull=True).values_list(
        "cell_type_id", flat=True
    ):
        ct = chains.by_id[cell_type_id]
        totals[chains.leaf(ct).name] += chains.leaf_count(ct)
    return dict(sorted(totals.items()))
