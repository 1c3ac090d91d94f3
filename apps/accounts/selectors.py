"""Which user accounts a user may see and manage (Django's user model has no tenant of its own).

- Platform admins see and manage every account.
- Tenant admins see and manage the accounts of their tenants' members, except accounts
  that also belong to a tenant they do not administer, and platform admins.
- Everyone else sees only their own account.
"""

from django.contrib.auth import get_user_model
from django.db.models import Q

from .roles import ADMIN_GROUP, admin_tenant_ids, is_platform_admin


def users_visible_to(user):
    users = get_user_model().objects.all()
    if is_platform_admin(user):
        return users
    if not user.is_authenticated:
        return users.none()
    admin_tenants = admin_tenant_ids(user)
    if not admin_tenants:
        return users.filter(pk=user.pk)
    return users.filter(Q(pk=user.pk) | Q(pk__in=_members_of(admin_tenants)))


def users_manageable_by(user):
    users = get_user_model().objects.all()
    if is_platform_admin(user):
        return users
    admin_tenants = admin_tenant_ids(user)
    if not admin_tenants:
        return users.none()
    from apps.tenants.models import Membership

    elsewhere = Membership.objects.exclude(tenant__in=admin_tenants).values("user")
    return (
        users.filter(pk__in=_members_of(admin_tenants))
        .exclude(pk__in=elsewhere)
        .exclude(is_superuser=True)
        .exclude(groups__name=ADMIN_GROUP)
    )


def _members_of(tenant_ids):
    from apps.tenants.models import Membership

    return Membership.objects.filter(tenant__in=tenant_ids).values("user")
