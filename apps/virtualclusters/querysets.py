from django.db import models

from apps.accounts.roles import is_platform_admin
from apps.tenants.querysets import TenantOwnedQuerySet


class VirtualClusterQuerySet(TenantOwnedQuerySet):
    def usable_by(self, user):
        """VCs the user may submit jobs to: granted to one of the user's groups, or shared with one."""
        from apps.accounts.sharing import shared_with_groups_of

        from .sharing import VirtualClusterGroupObjectPermission

        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        shared = shared_with_groups_of(user, VirtualClusterGroupObjectPermission, "view_virtualcluster")
        return self.filter(
            models.Q(pk__in=self.filter(grants__group__user=user).values("pk")) | models.Q(pk__in=shared)
        )

    def visible_to(self, user):
        # A member sees the VCs of their tenants and any VC granted or shared to one of their groups.
        if is_platform_admin(user):
            return self.all()
        return self.filter(
            models.Q(pk__in=super().visible_to(user).values("pk")) | models.Q(pk__in=self.usable_by(user).values("pk"))
        )


class VirtualClusterPartQuerySet(TenantOwnedQuerySet):
    tenant_field = "virtual_cluster__tenant"
