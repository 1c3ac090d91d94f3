from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from .querysets import VirtualClusterPartQuerySet, VirtualClusterQuerySet

vc_name_validator = RegexValidator(
    r"^[A-Za-z0-9_]+$", "OpenPAI VC names use letters, digits and '_' only."
)


class VirtualCluster(models.Model):
    """A tenant's guaranteed slice of one cluster, counted in cells (HiveD)."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="virtual_clusters")
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.PROTECT, related_name="virtual_clusters")
    name = models.CharField(max_length=64, unique=True, validators=[vc_name_validator])
    description = models.TextField(blank=True)
    cohort = models.CharField(
        max_length=64, blank=True, help_text="VCs in one cohort may borrow each other's idle cells."
    )
    borrowing_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most leaf cells this VC may borrow (empty: no limit)."
    )
    lending_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most leaf cells this VC lends while idle (empty: all idle cells)."
    )
    weight = models.FloatField(default=1.0, validators=[MinValueValidator(0.01)], help_text="Fair-sharing weight.")
    max_leaf_cells_per_user = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cap on one user's cells in this VC (empty: no cap)."
    )
    starvation_threshold = models.PositiveIntegerField(
        "starvation threshold (seconds)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="How long a guaranteed job waits before it holds a reservation: the devices it needs and the "
        "VC's quota for them, which only jobs ending before it can start may use meanwhile (empty: an hour).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VirtualClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = "virtual cluster"

    def __str__(self):
        return self.name


def quota_entry_name(cell_type, chain=None):
    """A quota entry as the scheduler reads it: ``TYPE``, or ``CHAIN.TYPE`` when it names
    the chain (by its top-level cell type) its cells must come from, as HiveD does."""
    return cell_type.name if chain is None else f"{chain.name}.{cell_type.name}"


class VirtualClusterCell(models.Model):
    """One quota entry: ``count`` cells of ``cell_type``, from ``chain`` when set."""

    virtual_cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="cells")
    cell_type = models.ForeignKey("clusters.CellType", on_delete=models.PROTECT, related_name="+")
    chain = models.ForeignKey(
        "clusters.CellType", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="The chain the cells must come from, named by its top-level cell type (a rack type, say), "
        "as HiveD's CHAIN.TYPE; empty: any chain of the SKU.",
    )
    count = models.PositiveIntegerField(validators=[MinValueValidator(1)])

    objects = VirtualClusterPartQuerySet.as_manager()

    class Meta:
        ordering = ["virtual_cluster__name", "cell_type__name", "chain__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["virtual_cluster", "cell_type"], condition=models.Q(chain__isnull=True),
                name="unique_vc_cell_type",
            ),
            models.UniqueConstraint(
                fields=["virtual_cluster", "cell_type", "chain"], condition=models.Q(chain__isnull=False),
                name="unique_vc_chain_cell_type",
            ),
        ]

    def __str__(self):
        return f"{self.count} × {self.entry}"

    @property
    def entry(self):
        return quota_entry_name(self.cell_type, self.chain)


class PinnedCell(models.Model):
    """A physical cell a VC owns outright: only jobs naming its pinned id run there."""

    virtual_cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="pinned_cells")
    physical_cell = models.OneToOneField("clusters.PhysicalCell", on_delete=models.PROTECT, related_name="pinned_to")

    objects = VirtualClusterPartQuerySet.as_manager()

    def __str__(self):
        return f"{self.physical_cell.pinned_id or self.physical_cell.address} → {self.virtual_cluster}"


class VirtualClusterGrant(models.Model):
    virtual_cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="grants")
    group = models.ForeignKey("accounts.Group", on_delete=models.CASCADE, related_name="vc_grants")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VirtualClusterPartQuerySet.as_manager()

    class Meta:
        ordering = ["virtual_cluster__name", "group__name"]
        constraints = [models.UniqueConstraint(fields=["virtual_cluster", "group"], name="unique_vc_grant")]

    def __str__(self):
        return f"{self.virtual_cluster} → {self.group}"

# Per-object shares (guardian permission models) live beside the model they share.
from .sharing import VirtualClusterGroupObjectPermission, VirtualClusterUserObjectPermission  # noqa: E402,F401
