"""What a VC's cells amount to, in leaf cells and in OpenPAI's {cpu, memory, gpu} units."""

import time
import uuid
from collections import defaultdict

from django.core.cache import cache
from django.db import transaction

from apps.clusters.topology import CellChains
from scheduler import SkuSpec

# Every job submit checks the job against its VC's SKUs and leaf cells. Those change
# rarely (an admin edits a quota, a cluster's cells), so they are cached under a topology
# generation that every such change replaces (`forget_topology`, called by the signal
# handlers of `apps.virtualclusters.signals` and by the services that bulk-write cells).
# The expiry bounds how long a change made where this cache cannot see it (another
# process on the embedded per-process cache, a raw SQL edit) takes to show.
TOPOLOGY_KEY = "pai:topology-generation"
SUBMIT_LIMITS_SECONDS = 60
# This process's copy of the current generation's entries: a submit then reads only the
# generation from a shared cache (Redis), not the entry too.
_memo = {}


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


def forget_topology():
    """Invalidate the cached submit limits of every VC: now, and again once the current
    transaction commits, so that a submit reading the old rows meanwhile cannot leave
    them cached under the new generation."""
    _new_generation()
    transaction.on_commit(_new_generation)


def _new_generation():
    cache.set(TOPOLOGY_KEY, uuid.uuid4().hex, None)


def _topology_generation():
    generation = cache.get(TOPOLOGY_KEY)
    if generation is None:
        cache.add(TOPOLOGY_KEY, uuid.uuid4().hex, None)
        generation = cache.get(TOPOLOGY_KEY)
    return generation


def submit_limits(vc, opportunistic=False):
    """({SKU name: SkuSpec}, {SKU name: leaf cells}) a job submitted to `vc` is checked against.

    The leaf cells are the VC's guarantee, or for an opportunistic job every cell of the
    VC's cluster. Cached (see `TOPOLOGY_KEY`): a submit reads none of the cell tables.
    """
    from apps.clusters.models import CellType

    generation = _topology_generation()
    key = f"pai:submit-limits:{generation}:{vc.pk}:{int(opportunistic)}"
    if _memo.get("generation") != generation:
        _memo.clear()
        _memo["generation"] = generation
    held = _memo.get(key)
    if held is not None and held[1] > time.monotonic():
        return held[0]
    limits = cache.get(key)
    if limits is None:
        chains = CellChains(list(CellType.objects.filter(cluster_id=vc.cluster_id)))
        skus = {
            ct.name: SkuSpec(ct.name, ct.gpu, ct.cpu, ct.memory_mb) for ct in chains.by_id.values() if ct.is_leaf
        }
        cells = cluster_leaf_cells(vc.cluster, chains) if opportunistic else guaranteed_leaf_cells(vc, chains)
        limits = (skus, cells)
        cache.set(key, limits, SUBMIT_LIMITS_SECONDS)
    _memo[key] = (limits, time.monotonic() + SUBMIT_LIMITS_SECONDS)
    return limits
