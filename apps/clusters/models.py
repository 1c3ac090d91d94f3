"""The physical side of the farm, in HiveD's terms (docs/scheduler.md).

A leaf cell type is one device of a SKU; non-leaf cell types nest a child type; one
level of each chain is the node level. Physical cells are the addressed instances.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from scheduler.spec import device_range

from .choices import BackendKind, ClusterClass

# A 1,000-node cluster: 10,000 pods cost ~30,000 requests (create, delete, one more): 2.5 minutes
# at 200/s, which leaves room inside the 5 minutes such a start-and-end should take (at 100/s the
# requests alone took them all). The chart's FlowSchema gives the API server's share for it.
DEFAULT_API_QPS = 200.0
DEFAULT_API_BURST = 400

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", "Use letters, digits, '_', '-' and '.', starting with a letter or digit."
)


class Cluster(models.Model):
    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    cluster_class = models.CharField(
        "class", max_length=16, choices=ClusterClass.choices, default=ClusterClass.PRODUCTION,
        help_text="Production clusters get the tighter on-call SLA.",
    )
    backend = models.CharField(max_length=16, choices=BackendKind.choices, default=BackendKind.LOCAL)
    connection = models.CharField(
        max_length=255,
        blank=True,
        help_text="Kubernetes: 'in-cluster', or the name of a secret/file holding a kubeconfig "
        "(optionally '#context'). Local: empty.",
    )
    description = models.TextField(blank=True)
    # The Kubernetes client's rate limit (a token bucket per cluster): pai's share of the API
    # server, to be granted by API Priority and Fairness (the Helm chart's FlowSchema).
    api_qps = models.FloatField(
        "API requests per second", default=DEFAULT_API_QPS,
        validators=[MinValueValidator(0.1), MaxValueValidator(10_000)],
        help_text="Kubernetes: the worker's sustained request rate to this cluster's API server. The default "
        "suits a 1,000-node cluster (10,000 pods start and end within minutes at about 3 requests each).",
    )
    api_burst = models.PositiveIntegerField(
        "API burst", default=DEFAULT_API_BURST, validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Kubernetes: how many requests may go at once above the rate, after a quiet spell.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Kept by the worker: whether the cluster's API answers (a cluster whose API stays down
    # is paused while the others go on).
    api_available = models.BooleanField(
        "API available", default=True, editable=False,
        help_text="False while the cluster's Kubernetes API does not answer: its jobs are paused.",
    )
    api_unavailable_since = models.DateTimeField("API unavailable since", null=True, blank=True, editable=False)
    api_error = models.TextField("last API error", blank=True, editable=False)
    # GPU utilisation of a Kubernetes cluster's pods (apps.monitoring.efficiency).
    prometheus_url = models.URLField(
        "Prometheus URL", max_length=500, blank=True,
        help_text="Where the worker reads GPU utilisation (e.g. http://prometheus.monitoring:9090); empty: not "
        "measured on Kubernetes.",
    )
    gpu_utilization_query = models.CharField(
        "GPU utilisation query", max_length=500, default="DCGM_FI_DEV_GPU_UTIL",
        help_text="PromQL giving each GPU's utilisation in % with the pod's `namespace` and `pod` labels (NVIDIA's "
        "DCGM exporter's series); pai averages it per pod.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class CellType(models.Model):
    """A level of a cell chain. A leaf cell type is a SKU: it says what one device brings."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="cell_types")
    name = models.CharField(max_length=64, validators=[name_validator])
    child = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="parents",
        help_text="Empty for a leaf cell type (a SKU).",
    )
    child_count = models.PositiveIntegerField(default=0)
    is_node_level = models.BooleanField(default=False, help_text="Cells of this type are whole Kubernetes nodes.")
    # What one leaf cell brings (leaf types only).
    gpu = models.PositiveIntegerField(default=1, help_text="Devices per leaf cell (0 for a CPU SKU).")
    cpu = models.FloatField(default=1, validators=[MinValueValidator(0)])
    memory_mb = models.PositiveIntegerField(default=1024)
    device_resource = models.CharField(max_length=100, default="nvidia.com/gpu", blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="unique_cell_type_name")]

    def __str__(self):
        return self.name

    @property
    def is_leaf(self):
        return self.child_id is None

    def clean(self):
        if self.child_id is not None:
            if self.child.cluster_id != self.cluster_id:
                raise ValidationError({"child": "The child cell type must belong to the same cluster."})
            if self.child_count < 1:
                raise ValidationError({"child_count": "A non-leaf cell type needs at least one child."})
            seen, node = {self.pk}, self.child
            while node is not None:
                if node.pk in seen:
                    raise ValidationError({"child": f"Cell type '{node.name}' would contain itself."})
                seen.add(node.pk)
                node = node.child
        elif self.child_count:
            raise ValidationError({"child_count": "A leaf cell type (a SKU) has no children."})


class PhysicalCell(models.Model):
    """An addressed cell: a rack or another level above the node, or a node (address =
    node name; on a host carrying several SKUs, the host and the range of its devices this
    SKU's cells hold: ``h1/4-7``).

    Levels below the node (switches, devices) are implied by the chain: device indices
    in order, addressed ``host/first-last`` by the host's indices. One is a row only to
    be pinned (a GPU pair a VC owns): under its parent cell, at one of those addresses.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="physical_cells")
    cell_type = models.ForeignKey(CellType, on_delete=models.PROTECT, related_name="physical_cells")
    address = models.CharField(
        max_length=253,
        help_text="A node's Kubernetes name; on a host carrying several SKUs, host/first-last (the host's devices "
        "this SKU's node holds, e.g. h1/4-7); below the node level, the devices it holds (n1/2-3).",
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    pinned_id = models.CharField(
        max_length=64, blank=True, default="", help_text="Id a VC uses to own this cell exclusively."
    )

    class Meta:
        ordering = ["cluster__name", "address"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "address"], name="unique_physical_cell_address"),
            models.UniqueConstraint(
                fields=["cluster", "pinned_id"], condition=~models.Q(pinned_id=""), name="unique_pinned_id"
            ),
        ]

    def __str__(self):
        return f"{self.address} ({self.cell_type.name})"

    def clean(self):
        if self.cell_type_id and self.cell_type.cluster_id != self.cluster_id:
            raise ValidationError({"cell_type": "The cell type must belong to the same cluster."})
        if self.parent_id is not None:
            if self.parent.cell_type.child_id != self.cell_type_id:
                raise ValidationError(
                    {"cell_type": f"A child of {self.parent.cell_type.name} must be of type "
                     f"{self.parent.cell_type.child.name if self.parent.cell_type.child else 'none'}."}
                )
        if self.cell_type_id:
            self._clean_devices()

    def _clean_devices(self):
        """A node's device range, or where a cell below the node level sits in its parent."""
        from .topology import CellChains

        chains = CellChains.for_cluster(self.cluster)
        kind = chains.by_id[self.cell_type_id]
        parent = chains.by_id[self.parent.cell_type_id] if self.parent_id is not None else None
        below = _below_node_level(chains)
        if kind.is_node_level:
            try:
                host, first, last = device_range(self.address)
            except ValueError as exc:
                raise ValidationError({"address": f"{exc}."}) from None
            size = chains.leaf_count(kind)
            if last is not None and last - first + 1 != size:
                raise ValidationError({"address": f"A {kind.name} holds {size} devices; {self.address} names "
                                       f"{last - first + 1} (e.g. {_range_address(host, first, size)})."})
            others = PhysicalCell.objects.filter(cluster_id=self.cluster_id, cell_type__is_node_level=True).filter(
                models.Q(address=host) | models.Q(address__startswith=f"{host}/")
            ).exclude(pk=self.pk).exclude(address=self.address).select_related("cell_type")  # a twin: not unique
            for other in others:
                o_first = device_range(other.address)[1]
                o_size = chains.leaf_count(chains.by_id[other.cell_type_id])
                if first < o_first + o_size and o_first < first + size:
                    raise ValidationError({"address": f"Devices {first}-{first + size - 1} of host {host} are also "
                                           f"node {other.address}'s ({other.cell_type.name}, devices {o_first}-"
                                           f"{o_first + o_size - 1}): each SKU of a host needs its own range."})
        elif parent is not None and (parent.is_node_level or parent.pk in below):
            host, first, _ = device_range(self.parent.address)
            size = chains.leaf_count(kind)
            held = [_range_address(host, first + i * size, size) for i in range(parent.child_count)]
            if self.address not in held:
                raise ValidationError({"address": f"A {kind.name} inside {self.parent.address} is one of "
                                       f"{', '.join(held)}."})
        elif parent is None and kind.pk in below:
            raise ValidationError({"parent": f"A {kind.name} is below the node level: name the node (or the cell "
                                   "inside it) that holds it."})


def _range_address(host, first, size):
    return f"{host}/{first}" if size == 1 else f"{host}/{first}-{first + size - 1}"


def _below_node_level(chains):
    """Ids of the cell types below some node-level type."""
    below = set()
    for kind in chains.by_id.values():
        if kind.is_node_level:
            while kind.child_id is not None:
                below.add(kind.child_id)
                kind = chains.by_id[kind.child_id]
    return below


class Node(models.Model):
    """A node as the backend sees it: health and inventory, kept current by the worker."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    ip = models.GenericIPAddressField(null=True, blank=True)
    ready = models.BooleanField(default=True)
    schedulable = models.BooleanField(default=True)
    gpu_capacity = models.PositiveIntegerField(default=0)
    cpu_capacity = models.FloatField(default=0)
    memory_mb_capacity = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    # Kept by the worker (Kubernetes): devices requested by pods pai does not manage. The engine
    # shows them as used and places no pod on them.
    gpu_used_by_others = models.PositiveIntegerField(
        "GPUs used by others", default=0, editable=False,
        help_text="Devices held by pods pai does not manage (other schedulers, daemons).",
    )
    # What the engine takes as used by others: the leaf cells whose devices those pods hold,
    # or whose CPU or memory they take beyond what the node keeps spare.
    cells_used_by_others = models.PositiveIntegerField(
        "cells used by others", default=0, editable=False,
        help_text="Leaf cells pai cannot use: pods it does not manage hold their devices, or take the CPU or "
        "memory they need beyond what the node has spare (allocatable less the node's leaf cells).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="unique_node_name")]

    def __str__(self):
        return self.name

    @property
    def healthy(self):
        return self.ready and self.schedulable
