from django.contrib.auth import models as auth_models
from django.db import models

from apps.tenants.querysets import TenantOwnedQuerySet

from .roles import ADMIN_GROUP, DEFAULT_GROUP, is_platform_admin, member_tenant_ids

BUILTIN_GROUPS = (DEFAULT_GROUP, ADMIN_GROUP)


class GroupQuerySet(TenantOwnedQuerySet):
    def visible_to(self, user):
        # Members also see the built-in groups, which belong to no tenant.
        if is_platform_admin(user):
            return self.all()
        return self.filter(models.Q(tenant__in=member_tenant_ids(user)) | models.Q(tenant__isnull=True))


class Group(auth_models.Group):
    """A pai group: a Django group with a tenant and the external (OIDC/AAD) group it mirrors.

    Access to virtual clusters and storage is granted to groups. The built-in `default`
    group holds every user; `admingroup` makes platform admins. Both belong to no tenant.
    """

    tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="groups"
    )
    external_name = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The identity provider's group this one mirrors (OIDC mode syncs membership from it).",
    )
    description = models.TextField(blank=True)
    is_builtin = models.BooleanField(default=False, editable=False)

    objects = GroupQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["external_name"], condition=~models.Q(external_name=""), name="unique_group_external_name"
            ),
        ]

    def __str__(self):
        return self.name
