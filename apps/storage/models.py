from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from apps.accounts.roles import group_ids_of, is_platform_admin
from apps.tenants.querysets import TenantOwnedQuerySet

from .choices import StorageKind

storage_name_validator = RegexValidator(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "Use a DNS label: a-z, 0-9 and '-'.")


class StorageServerQuerySet(TenantOwnedQuerySet):
    pass


class StorageServer(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="storage_servers")
    name = models.CharField(max_length=63, unique=True, validators=[storage_name_validator])
    kind = models.CharField(max_length=16, choices=StorageKind.choices)
    address = models.CharField(max_length=255, blank=True, help_text="Server address or account name.")
    root_path = models.CharField(max_length=1024, blank=True, help_text="Export, share, container or host path.")
    options = models.JSONField(default=dict, blank=True, help_text="Mount options; never put credentials here.")

    objects = StorageServerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        if self.kind != StorageKind.HOST_PATH and not self.address:
            raise ValidationError({"address": f"A {self.get_kind_display()} server needs an address."})
        if self.kind == StorageKind.HOST_PATH and not self.root_path.startswith("/"):
            raise ValidationError({"root_path": "A host path must be absolute."})


class StorageConfigQuerySet(TenantOwnedQuerySet):
    def granted_to(self, user):
        """Storages the user may mount: granted to one of their groups, or shared with one."""
        from apps.accounts.sharing import shared_with_groups_of

        from .sharing import StorageConfigGroupObjectPermission

        if user is None or not user.is_authenticated:
            return self.none()
        shared = shared_with_groups_of(user, StorageConfigGroupObjectPermission, "view_storageconfig")
        granted = self.filter(grants__group_id__in=group_ids_of(user)).values("pk")
        return self.filter(models.Q(pk__in=granted) | models.Q(pk__in=shared))

    def visible_to(self, user):
        # A member sees their tenants' storages and any storage shared with one of their groups.
        if is_platform_admin(user):
            return self.all()
        return self.filter(
            models.Q(pk__in=super().visible_to(user).values("pk")) | models.Q(pk__in=self.granted_to(user).values("pk"))
        )


class StorageConfig(models.Model):
    """A mountable storage: a claim on a server, where it mounts, and how."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="storage_configs")
    name = models.CharField(max_length=63, unique=True, validators=[storage_name_validator])
    server = models.ForeignKey(StorageServer, on_delete=models.PROTECT, related_name="configs")
    claim_name = models.CharField(
        max_length=253, blank=True, help_text="The PersistentVolumeClaim on Kubernetes (default: the config name)."
    )
    sub_path = models.CharField(max_length=1024, blank=True)
    mount_path = models.CharField(max_length=1024, help_text="Where tasks see it, e.g. /mnt/data.")
    read_only = models.BooleanField(default=False)
    per_user_sub_path = models.BooleanField(default=False, help_text="Mount <sub_path>/<username> for each user.")

    objects = StorageConfigQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        if self.mount_path and not self.mount_path.startswith("/"):
            raise ValidationError({"mount_path": "The mount path must be absolute."})
        if self.server_id and self.tenant_id and self.server.tenant_id != self.tenant_id:
            raise ValidationError({"server": "The server belongs to another tenant."})


class StorageGrantQuerySet(TenantOwnedQuerySet):
    tenant_field = "storage__tenant"


class StorageGrant(models.Model):
    storage = models.ForeignKey(StorageConfig, on_delete=models.CASCADE, related_name="grants")
    group = models.ForeignKey("accounts.Group", on_delete=models.CASCADE, related_name="storage_grants")
    is_default = models.BooleanField(
        default=False, help_text="Mounted into this group's jobs when a job names no storage."
    )

    objects = StorageGrantQuerySet.as_manager()

    class Meta:
        ordering = ["storage__name", "group__name"]
        constraints = [
            models.UniqueConstraint(fields=["storage", "group"], name="unique_storage_grant"),
        ]

    def __str__(self):
        return f"{self.storage} → {self.group}"

# Per-object shares (guardian permission models) live beside the model they share.
from .sharing import StorageConfigGroupObjectPermission, StorageConfigUserObjectPermission  # noqa: E402,F401
