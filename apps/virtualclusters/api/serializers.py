"""OpenPAI's virtual cluster object: resources used, guaranteed and total, and capacity percentages."""

from collections import defaultdict

from rest_framework import serializers

from apps.clusters.models import CellType, PhysicalCell
from apps.clusters.topology import CellChains
from apps.jobs.selectors import resources_in_use_by_vc
from apps.virtualclusters.capacity import guaranteed_leaf_cells, resources_of_leaf_cells


class ResourcesSerializer(serializers.Serializer):
    cpu = serializers.FloatField()
    memory = serializers.IntegerField(help_text="MB")
    gpu = serializers.IntegerField()
    vCores = serializers.FloatField(help_text="Same as cpu.")
    GPUs = serializers.IntegerField(help_text="Same as gpu.")


class VirtualClusterInfoSerializer(serializers.Serializer):
    capacity = serializers.FloatField(help_text="Guaranteed share of the cluster, in percent (of GPUs; of CPUs "
                                      "on a cluster without GPUs).")
    usedCapacity = serializers.FloatField(help_text="Share of the cluster this VC's jobs hold, in percent.")
    maxCapacity = serializers.FloatField(help_text="100 when the VC may borrow idle cells of its cohort, else "
                                         "its capacity.")
    dedicated = serializers.BooleanField(help_text="True when the VC owns pinned cells.")
    resourcesUsed = ResourcesSerializer()
    resourcesGuaranteed = ResourcesSerializer()
    resourcesTotal = ResourcesSerializer(help_text="The whole cluster the VC lives in.")
    cluster = serializers.CharField(help_text="pai extension: the cluster's name.")
    guaranteedCells = serializers.DictField(
        child=serializers.IntegerField(), help_text="pai extension: guaranteed leaf cells (devices) per SKU."
    )


EXAMPLE = {
    "capacity": 50.0,
    "usedCapacity": 25.0,
    "maxCapacity": 50.0,
    "dedicated": False,
    "resourcesUsed": {"cpu": 64, "memory": 524288, "gpu": 8, "vCores": 64, "GPUs": 8},
    "resourcesGuaranteed": {"cpu": 160, "memory": 1179648, "gpu": 16, "vCores": 160, "GPUs": 16},
    "resourcesTotal": {"cpu": 320, "memory": 2359296, "gpu": 32, "vCores": 320, "GPUs": 32},
    "cluster": "local",
    "guaranteedCells": {"A100": 16, "CPU": 8},
}


def _number(value):
    return int(value) if float(value).is_integer() else value


def _resources(triple):
    cpu, memory, gpu = _number(triple["cpu"]), int(triple["memory"]), int(triple["gpu"])
    return {"cpu": cpu, "memory": memory, "gpu": gpu, "vCores": cpu, "GPUs": gpu}


def _percent(part, whole):
    return round(100.0 * part / whole, 2) if whole else 0.0


def present_virtual_clusters(vcs, used=None):
    """{name: OpenPAI VC object} for `vcs`, in a fixed number of queries whatever their number.

    `vcs` must come with `cluster` selected and `cells`, `pinned_cells__physical_cell` prefetched.
    `used` is `resources_in_use_by_vc(vcs)` when the caller has it already.
    """
    vcs = list(vcs)
    cluster_ids = {vc.cluster_id for vc in vcs}
    cell_types = defaultdict(list)
    for ct in CellType.objects.filter(cluster_id__in=cluster_ids):
        cell_types[ct.cluster_id].append(ct)
    chains = {cid: CellChains(cts) for cid, cts in cell_types.items()}
    totals = {cid: defaultdict(int) for cid in cluster_ids}
    for cell in PhysicalCell.objects.filter(cluster_id__in=cluster_ids, parent__isnull=True).only(
        "cluster_id", "cell_type_id"
    ):
        chain = chains[cell.cluster_id]
        ct = chain.by_id[cell.cell_type_id]
        totals[cell.cluster_id][chain.leaf(ct).name] += chain.leaf_count(ct)
    used = resources_in_use_by_vc(vcs) if used is None else used
    result = {}
    for vc in vcs:
        chain = chains.get(vc.cluster_id) or CellChains([])
        leaf_cells = guaranteed_leaf_cells(vc, chain)
        guaranteed = resources_of_leaf_cells(leaf_cells, chain)
        total = resources_of_leaf_cells(totals[vc.cluster_id], chain)
        in_use = used.get(vc.pk, {"cpu": 0, "memory": 0, "gpu": 0})
        basis = "gpu" if total["gpu"] else "cpu"
        capacity = _percent(guaranteed[basis], total[basis])
        result[vc.name] = {
            "capacity": capacity,
            "usedCapacity": _percent(in_use[basis], total[basis]),
            "maxCapacity": 100.0 if vc.cohort else capacity,
            "dedicated": bool(vc.pinned_cells.all()),
            "resourcesUsed": _resources(in_use),
            "resourcesGuaranteed": _resources(guaranteed),
            "resourcesTotal": _resources(total),
            "cluster": vc.cluster.name,
            "guaranteedCells": leaf_cells,
        }
    return result


class QuotaEntrySerializer(serializers.Serializer):
    cellType = serializers.CharField(max_length=64, help_text="A cell type of the VC's cluster (a leaf type too).")
    chain = serializers.CharField(
        max_length=64, required=False, allow_null=True, allow_blank=True, default=None,
        help_text="The chain the cells come from, named by its top-level cell type (HiveD's CHAIN.TYPE); "
        "empty or null: any chain of the SKU.",
    )
    count = serializers.IntegerField(min_value=1, max_value=1_000_000)


class QuotaSerializer(serializers.Serializer):
    """A VC's quota: its guaranteed cells, entry by entry (pai extension)."""

    cells = QuotaEntrySerializer(many=True, max_length=200)
    pinnedCells = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Pinned cells the VC owns (set in the admin)."
    )
    starvationThresholdSeconds = serializers.IntegerField(
        min_value=1, max_value=30 * 24 * 3600, required=False, allow_null=True,
        help_text="How long a guaranteed job of the VC waits before it holds a reservation (the devices it needs "
        "and the VC's quota for them); null: the scheduler's default (an hour). Left as is when absent.",
    )
    confirmShrink = serializers.BooleanField(
        default=False, write_only=True,
        help_text="Needed when the new quota is below what the VC's running jobs hold: they run on as "
        "opportunistic (preemptible) jobs.",
    )

    def validate_cells(self, entries):
        """Names become the cluster's cell types; each error names its entry and field."""
        from apps.virtualclusters.services import entry_problems

        cluster = self.context["cluster"]
        types = {ct.name: ct for ct in CellType.objects.filter(cluster=cluster).select_related("child")}
        errors, cells = [{} for _ in entries], []
        for index, entry in enumerate(entries):
            cell_type = types.get(entry["cellType"])
            chain = types.get(entry["chain"]) if entry.get("chain") else None
            if cell_type is None:
                errors[index]["cellType"] = [f"Cluster {cluster.name} has no cell type {entry['cellType']!r}."]
            if entry.get("chain") and chain is None:
                errors[index]["chain"] = [f"Cluster {cluster.name} has no cell type {entry['chain']!r}."]
            cells.append((cell_type, entry["count"], chain))
        if not any(errors):
            for index, field, message in entry_problems(cluster, cells):
                errors[index].setdefault("cellType" if field == "cell_type" else field, []).append(message)
        if any(errors):
            raise serializers.ValidationError(errors)
        return cells


QUOTA_EXAMPLE = {
    "cells": [
        {"cellType": "A100-NODE", "chain": "A100-RACK3", "count": 2},
        {"cellType": "CPU-NODE", "chain": None, "count": 1},
    ],
    "pinnedCells": [],
    "starvationThresholdSeconds": 1800,
}


def present_quota(vc):
    return {
        "cells": [
            {"cellType": c.cell_type.name, "chain": c.chain.name if c.chain_id else None, "count": c.count}
            for c in vc.cells.select_related("cell_type", "chain").order_by("cell_type__name", "chain__name")
        ],
        "pinnedCells": sorted(
            p.physical_cell.pinned_id or p.physical_cell.address for p in vc.pinned_cells.select_related("physical_cell")
        ),
        "starvationThresholdSeconds": vc.starvation_threshold,
    }
