"""The scoping every view goes through: `.visible_to(user)` for reads, `.manageable_by(user)` for writes."""

from django.db import models

from apps.accounts.roles import admin_tenant_ids, is_platform_admin, member_tenant_ids


class TenantOwnedQuerySet(models.QuerySet):
    """For models with a `tenant` foreign key.

    Members read their tenants' rows; tenant admins manage them; platform admins see all.
    Models whose tenant lives elsewhere set `tenant_field` on the queryset subclass.
    """

    tenant_field = "tenant"

    def visible_to(self, user):
        if is_platform_admin(user):
            return self.all()
        return self.filter(**{f"{self.tenant_field}__in": member_tenant_ids(user)})

    def manageable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        return self.filter(**{f"{self.tenant_field}__in": admin_tenant_ids(user)})


class TenantQuerySet(models.QuerySet):
    def visible_to(self, user):
        if is_platform_admin(user):
            return self.all()
        return self.filter(pk__in=member_tenant_ids(user))

    def manageable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        return self.filter(pk__in=admin_tenant_ids(user))
