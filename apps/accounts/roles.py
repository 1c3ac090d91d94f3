"""Who a user is to pai: platform admin, admin of some tenants, member of some tenants.

These answers feed every scoped queryset, so they are cached on the user object for the
length of a request.
"""

ADMIN_GROUP = "admingroup"
DEFAULT_GROUP = "default"


def is_platform_admin(user):
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_pai_platform_admin", None)
    if cached is None:
        cached = user.groups.filter(name=ADMIN_GROUP).exists()
        user._pai_platform_admin = cached
    return cached


def remember_platform_admin(user, in_admin_group):
    """Cache what a query that loaded the user already says of its admin group membership."""
    user._pai_platform_admin = bool(in_admin_group)


def _tenant_ids(user, admin_only):
    from apps.tenants.models import Membership

    if user is None or not user.is_authenticated:
        return frozenset()
    attr = "_pai_admin_tenants" if admin_only else "_pai_member_tenants"
    cached = getattr(user, attr, None)
    if cached is None:
        memberships = Membership.objects.filter(user=user)
        if admin_only:
            memberships = memberships.filter(role=Membership.Role.ADMIN)
        cached = frozenset(memberships.values_list("tenant_id", flat=True))
        setattr(user, attr, cached)
    return cached


def admin_tenant_ids(user):
    """Tenants this user administers (empty for platform admins who are not members)."""
    return _tenant_ids(user, admin_only=True)


def member_tenant_ids(user):
    """Tenants this user belongs to, in any role."""
    return _tenant_ids(user, admin_only=False)


def group_ids_of(user):
    """The user's group ids as a subquery on the user-group table alone.

    Filter on `group_id__in=group_ids_of(user)` rather than `group__user=user`: the latter
    joins pai's group, Django's group and the user-group table, and PostgreSQL spends more
    time planning those joins than running the query.
    """
    from django.contrib.auth import get_user_model

    return get_user_model().groups.through.objects.filter(user_id=user.pk).values("group_id")


def is_tenant_admin(user, tenant=None):
    ids = admin_tenant_ids(user)
    return bool(ids) if tenant is None else tenant.pk in ids


def forget(user):
    """Drop cached answers after the user's memberships or groups change."""
    for attr in ("_pai_platform_admin", "_pai_admin_tenants", "_pai_member_tenants"):
        if hasattr(user, attr):
            delattr(user, attr)
