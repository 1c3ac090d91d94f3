from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from apps.accounts.roles import admin_tenant_ids, is_platform_admin
from apps.tenants.querysets import TenantOwnedQuerySet


class UsageRecordQuerySet(TenantOwnedQuerySet):
    def readable_by(self, user):
        """Team admins and platform admins read their tenants' rows; members their own."""
        if is_platform_admin(user):
            return self.all()
        return self.filter(models.Q(tenant__in=admin_tenant_ids(user)) | models.Q(user=user))


class UsageRecord(models.Model):
    """What one job attempt used of one SKU in one calendar month: the usage ledger.

    Written when the attempt ends, one row per SKU and month it spans (an attempt that
    crosses a month's end counts in both). Names are copied and the links are weak, so
    the ledger outlives the job, and may outlive the user or the VC.
    """

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="usage_records")
    virtual_cluster = models.ForeignKey(
        "virtualclusters.VirtualCluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    vc_name = models.CharField("virtual cluster", max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150)
    cluster_name = models.CharField("cluster", max_length=64)
    job_id = models.BigIntegerField(help_text="The job's id (the job itself may be deleted).")
    job_name = models.CharField(max_length=255)
    attempt_index = models.PositiveIntegerField()
    priority_class = models.CharField(max_length=8)
    sku = models.CharField("SKU", max_length=64)
    gpus = models.PositiveIntegerField(help_text="Devices the attempt held of this SKU.")
    cpus = models.FloatField(help_text="CPUs of the leaf cells the attempt held of this SKU.")
    month = models.DateField(help_text="The first day of the calendar month (in pai's time zone).")
    started_at = models.DateTimeField(help_text="When this month's part began: placement, or the month's start.")
    ended_at = models.DateTimeField()
    gpu_hours = models.FloatField()
    cpu_hours = models.FloatField()

    objects = UsageRecordQuerySet.as_manager()

    class Meta:
        ordering = ["-month", "-ended_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["job_id", "attempt_index", "sku", "month"], name="unique_usage_piece"),
        ]
        indexes = [
            models.Index(fields=["virtual_cluster", "month"], name="usage_vc_month"),
            models.Index(fields=["tenant", "month"], name="usage_tenant_month"),
            models.Index(fields=["user", "month"], name="usage_user_month"),
        ]

    def __str__(self):
        return f"{self.username}~{self.job_name}#{self.attempt_index} {self.sku} {self.month:%Y-%m}"


class GpuHourBudgetQuerySet(TenantOwnedQuerySet):
    tenant_field = "virtual_cluster__tenant"


class GpuHourBudget(models.Model):
    """How many GPU-hours a VC may use per calendar month; the scheduler holds guaranteed
    jobs that would take it past the budget until the next month."""

    virtual_cluster = models.OneToOneField(
        "virtualclusters.VirtualCluster", on_delete=models.CASCADE, related_name="gpu_hour_budget"
    )
    gpu_hours_per_month = models.FloatField(validators=[MinValueValidator(0)])
    note = models.CharField(max_length=255, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = GpuHourBudgetQuerySet.as_manager()

    class Meta:
        verbose_name = "GPU-hour budget"

    def __str__(self):
        return f"{self.virtual_cluster}: {self.gpu_hours_per_month:,.0f} GPU-hours a month"

    @property
    def tenant(self):
        return self.virtual_cluster.tenant
