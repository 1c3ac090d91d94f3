from django.db import models

from apps.accounts.roles import group_ids_of, is_platform_admin
from apps.tenants.querysets import TenantOwnedQuerySet
from pai import rawsql


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
            models.Q(pk__in=self.filter(grants__group_id__in=group_ids_of(user)).values("pk")) | models.Q(pk__in=shared)
        )

    def named_for_submit(self, user, name):
        """(vc, usable) for the VC named `name`, or (None, False): what `usable_by` decides, for one VC.

        Every job submit asks this, so it is one hand-written query on the VC's unique name
        with two correlated EXISTS (a grant to one of the user's groups, a share with one):
        the ORM's version of it cost more to build and to plan than to run. The VC comes
        with its id, tenant, cluster and name loaded; other fields load when read.
        """
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Permission
        from django.db import connections

        from .models import VirtualClusterGrant
        from .sharing import VirtualClusterGroupObjectPermission

        admin = is_platform_admin(user)
        if not admin and (user is None or not user.is_authenticated):
            return None, False
        vc_table = self.model._meta.db_table
        sql = (
            f'SELECT vc.id, vc.tenant_id, vc.cluster_id, vc.name, %s OR EXISTS ('
            f'SELECT 1 FROM "{VirtualClusterGrant._meta.db_table}" g JOIN "{get_user_model().groups.through._meta.db_table}" ug'
            f' ON ug.group_id = g.group_id WHERE g.virtual_cluster_id = vc.id AND ug.user_id = %s'
            f') OR EXISTS ('
            f'SELECT 1 FROM "{VirtualClusterGroupObjectPermission._meta.db_table}" s'
            f' JOIN "{get_user_model().groups.through._meta.db_table}" ug ON ug.group_id = s.group_id'
            f' JOIN "{Permission._meta.db_table}" p ON p.id = s.permission_id'
            f' WHERE s.content_object_id = vc.id AND ug.user_id = %s AND p.codename = %s'
            f') FROM "{vc_table}" vc WHERE vc.name = %s'
        )
        with connections[self.db].cursor() as cursor:
            cursor.execute(sql, [admin, user.pk, user.pk, "view_virtualcluster", name])
            row = cursor.fetchone()
        if row is None:
            return None, False
        vc = rawsql.instance(self.model, self.db, ["id", "tenant_id", "cluster_id", "name"], row[:4])
        return vc, bool(row[4])

    def visible_to(self, user):
        # A member sees the VCs of their tenants and any VC granted or shared to one of their groups.
        if is_platform_admin(user):
            return self.all()
        return self.filter(
            models.Q(pk__in=super().visible_to(user).values("pk")) | models.Q(pk__in=self.usable_by(user).values("pk"))
        )


class VirtualClusterPartQuerySet(TenantOwnedQuerySet):
    tenant_field = "virtual_cluster__tenant"
