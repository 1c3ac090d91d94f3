"""Account actions: tokens, users, groups. Each is atomic and writes an audit row.

Callers (API views, admin) decide who may act on what through the scoped querysets;
these functions check the rules that hold whoever acts: the built-in groups stay what
they are, a password passes the validators, a group's grants stay in its tenant.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.audit.services import record

from . import roles, usernames
from .models import ApiToken, Group, UserProfile
from .tokens import digest_of, new_secret, prefix_of

DEFAULT_LOGIN_TOKEN_SECONDS = 7 * 24 * 3600

UNSET = object()


# --- Tokens ---------------------------------------------------------------------------
def _issue_token(user, *, application, expires_at):
    token = new_secret()
    row = ApiToken.objects.create(
        user=user, prefix=prefix_of(token), digest=digest_of(token), application=application, expires_at=expires_at
    )
    return row, token


@transaction.atomic
def issue_login_token(user, expiration_seconds=None):
    """A login token for `user`, valid `expiration_seconds` (default 7 days, OpenPAI's), at most
    `PAI_LOGIN_TOKEN_MAX_SECONDS`: a longer expiration is shortened to it. Returns (row, token)."""
    seconds = DEFAULT_LOGIN_TOKEN_SECONDS if expiration_seconds is None else expiration_seconds
    if seconds < 1:
        raise ValidationError({"expiration": "Must be at least 1 second."})
    seconds = min(seconds, settings.PAI_LOGIN_TOKEN_MAX_SECONDS)
    now = timezone.now()
    # Expired tokens are useless; dropping the user's at each login keeps the table from growing forever.
    ApiToken.objects.filter(user=user, expires_at__lte=now).delete()
    row, token = _issue_token(user, application=False, expires_at=now + timedelta(seconds=seconds))
    record(user, "token.login", row, changes={"expires_at": row.expires_at.isoformat()})
    return row, token


@transaction.atomic
def issue_application_token(user):
    """An application token: no expiry, revocable. Returns (row, token)."""
    row, token = _issue_token(user, application=True, expires_at=None)
    record(user, "token.application", row)
    return row, token


@transaction.atomic
def revoke_token(actor, row):
    record(actor, "token.revoke", row, changes={"prefix": row.prefix, "application": row.application})
    row.delete()


def revoke_all_tokens(actor, user, reason):
    """Revoke every token of `user`, login and application: on a password change, a
    deactivation, a removal from a team (`signals.py` calls it, whatever changed them)."""
    count, _ = ApiToken.objects.filter(user=user).delete()
    if count:
        record(actor, "token.revoke_all", user, changes={"count": count, "reason": reason})
    return count


# --- Users ----------------------------------------------------------------------------
def _check_password(password, user, field):
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError({field: exc.messages}) from None


def _vc_groups(virtual_clusters):
    """OpenPAI's basic-mode rule: access to a VC is membership of the VC's same-named group."""
    names = {vc.name for vc in virtual_clusters}
    groups = {g.name: g for g in Group.objects.filter(name__in=names, vc_grants__virtual_cluster__name=F("name"))}
    missing = sorted(names - set(groups))
    if missing:
        raise ValidationError({"virtualCluster": f"No group of the same name grants {', '.join(missing)}."})
    return list(groups.values())


def _vc_group_names():
    """Names of the groups that stand for a VC in basic mode (a VC's same-named, granting group)."""
    return set(
        Group.objects.filter(vc_grants__virtual_cluster__name=F("name")).values_list("name", flat=True)
    )


def _join_tenants(actor, user, groups):
    """Joining a team's group makes the user a member of the team."""
    for tenant_id in sorted({g.tenant_id for g in groups if g.tenant_id}):
        _join_tenant(actor, user, tenant_id)


def _join_tenant(actor, user, tenant_id):
    from apps.tenants.models import Membership

    membership, created = Membership.objects.get_or_create(tenant_id=tenant_id, user=user)
    if created:
        record(actor, "membership.create", membership, changes={"role": membership.role})


def _builtin(name):
    return Group.objects.get(name=name)


@transaction.atomic
def create_user(
    actor, *, username, password, email="", admin=False, virtual_clusters=(), extension=None, tenants=()
):
    """Create a basic-mode account; `virtual_clusters` become groups, `tenants` memberships besides theirs."""
    User = get_user_model()
    if usernames.is_taken(username):
        raise IntegrityError(f"User name {username} {usernames.TAKEN}.")
    user = User(username=username, email=email or "")
    _check_password(password, user, "password")
    user.set_password(password)
    user.save()
    UserProfile.objects.create(user=user, extension=extension or {})
    groups = _vc_groups(virtual_clusters)
    if admin:
        groups.append(_builtin(roles.ADMIN_GROUP))
    user.groups.add(*groups)
    _join_tenants(actor, user, groups)
    for tenant in tenants:
        _join_tenant(actor, user, tenant.pk)
    roles.forget(user)
    record(
        actor,
        "user.create",
        user,
        changes={"email": user.email, "admin": admin, "groups": sorted(g.name for g in groups)},
    )
    return user


@transaction.atomic
def update_user(
    actor, user, *, email=UNSET, password=UNSET, admin=UNSET, virtual_clusters=UNSET, extension=UNSET,
    kept_groups=None,
):
    """Change what OpenPAI's `PUT /users` changes; unset arguments stay as they are.

    `virtual_clusters` replaces the user's VC groups (the VCs' same-named groups) and
    leaves their other groups alone, and those in `kept_groups` (a queryset: groups the
    actor may not touch). A new password revokes all the user's tokens (`signals.py`).
    """
    changes = {}
    if email is not UNSET and email != user.email:
        changes["email"] = [user.email, email]
        user.email = email
    if password is not UNSET:
        _check_password(password, user, "password")
        user.set_password(password)
        changes["password"] = True
    user.save()
    if extension is not UNSET:
        profile, _ = UserProfile.objects.get_or_create(user=user)
        if profile.extension != extension:
            changes["extension"] = [profile.extension, extension]
            profile.extension = extension
            profile.save(update_fields=["extension"])
    if virtual_clusters is not UNSET:
        wanted = _vc_groups(virtual_clusters)
        current = set(user.groups.filter(name__in=_vc_group_names()).values_list("name", flat=True))
        remove = current - {g.name for g in wanted}
        if kept_groups is not None:
            remove -= set(kept_groups.values_list("name", flat=True))
        user.groups.remove(*Group.objects.filter(name__in=remove))
        user.groups.add(*wanted)
        _join_tenants(actor, user, wanted)
        if remove or current != {g.name for g in wanted}:
            changes["virtualCluster"] = [sorted(current), sorted(g.name for g in wanted)]
    if admin is not UNSET:
        is_admin = user.groups.filter(name=roles.ADMIN_GROUP).exists()
        if admin and not is_admin:
            user.groups.add(_builtin(roles.ADMIN_GROUP))
        elif not admin and is_admin:
            if user.pk == getattr(actor, "pk", None):
                raise ValidationError({"admin": "You cannot remove your own admin rights."})
            user.groups.remove(_builtin(roles.ADMIN_GROUP))
        if admin != is_admin:
            changes["admin"] = [is_admin, admin]
    roles.forget(user)
    record(actor, "user.update", user, changes=changes)
    return user


@transaction.atomic
def change_own_profile(user, *, email=UNSET, new_password=UNSET, old_password=None):
    """`PUT /users/me`: a user's own e-mail and password; the old password proves it is them."""
    changes = {}
    if new_password is not UNSET:
        if not old_password or not user.check_password(old_password):
            raise ValidationError({"oldPassword": "The old password is incorrect."})
        _check_password(new_password, user, "newPassword")
        user.set_password(new_password)
        changes["password"] = True
    if email is not UNSET and email != user.email:
        changes["email"] = [user.email, email]
        user.email = email
    user.save()
    record(user, "user.update_self", user, changes=changes)
    return user


@transaction.atomic
def set_default_virtual_cluster(user, vc):
    """The user's default VC (None: the first granted to their groups, by name); it must be
    one they may submit to. `apps.jobs.services.default_virtual_cluster` reads it."""
    from apps.virtualclusters.models import VirtualCluster

    if vc is not None and not VirtualCluster.objects.usable_by(user).filter(pk=vc.pk).exists():
        raise ValidationError({"default_virtual_cluster": f"You may not submit jobs to virtual cluster {vc.name}."})
    profile, _ = UserProfile.objects.get_or_create(user=user)
    before = profile.default_virtual_cluster.name if profile.default_virtual_cluster_id else None
    profile.default_virtual_cluster = vc
    profile.save(update_fields=["default_virtual_cluster"])
    record(user, "user.default_vc", user, changes={"default_virtual_cluster": [before, vc.name if vc else None]})
    return profile


@transaction.atomic
def delete_user(actor, user):
    if user.pk == getattr(actor, "pk", None):
        raise ValidationError({"username": "You cannot delete your own account."})
    record(actor, "user.delete", user, changes={"username": user.username})
    user.delete()


@transaction.atomic
def set_user_groups(actor, user, groups, *, keep=()):
    """Replace the user's groups with `groups` plus `keep` (groups the actor may not touch).

    The `default` group is always kept; `admingroup` is set or kept by the caller's choice.
    """
    wanted = {g.pk: g for g in [*groups, *keep]}
    default = _builtin(roles.DEFAULT_GROUP)
    wanted.setdefault(default.pk, default)
    if user.pk == getattr(actor, "pk", None) and roles.is_platform_admin(user):
        if roles.ADMIN_GROUP not in {g.name for g in wanted.values()}:
            raise ValidationError({"grouplist": "You cannot remove your own admin rights."})
    before = sorted(user.groups.values_list("name", flat=True))
    user.groups.set(list(wanted.values()))
    _join_tenants(actor, user, wanted.values())
    roles.forget(user)
    after = sorted(g.name for g in wanted.values())
    record(actor, "user.set_groups", user, changes={"grouplist": [before, after]} if before != after else {})
    return user


@transaction.atomic
def add_user_to_group(actor, user, group):
    user.groups.add(group)
    _join_tenants(actor, user, [group])
    roles.forget(user)
    record(actor, "user.add_group", user, changes={"group": group.name})


@transaction.atomic
def remove_user_from_group(actor, user, group):
    if group.name == roles.DEFAULT_GROUP:
        raise ValidationError({"groupname": "Every user stays in the default group."})
    if group.name == roles.ADMIN_GROUP and user.pk == getattr(actor, "pk", None):
        raise ValidationError({"groupname": "You cannot remove your own admin rights."})
    user.groups.remove(group)
    roles.forget(user)
    record(actor, "user.remove_group", user, changes={"group": group.name})


# --- Groups ---------------------------------------------------------------------------
def _check_grants(group_tenant, virtual_clusters, storages):
    foreign = sorted(vc.name for vc in virtual_clusters if vc.tenant_id != group_tenant.pk)
    if foreign:
        raise ValidationError({"extension.acls.virtualClusters": f"Not VCs of {group_tenant}: {', '.join(foreign)}."})
    foreign = sorted(s.name for s in storages if s.tenant_id != group_tenant.pk)
    if foreign:
        raise ValidationError(
            {"extension.acls.storageConfigs": f"Not storages of {group_tenant}: {', '.join(foreign)}."}
        )


def _set_grants(group, virtual_clusters, storages):
    from apps.storage.models import StorageGrant
    from apps.virtualclusters.models import VirtualClusterGrant

    changes = {}
    if virtual_clusters is not None:
        before = set(group.vc_grants.values_list("virtual_cluster__name", flat=True))
        group.vc_grants.exclude(virtual_cluster__in=virtual_clusters).delete()
        for vc in virtual_clusters:
            VirtualClusterGrant.objects.get_or_create(virtual_cluster=vc, group=group)
        after = {vc.name for vc in virtual_clusters}
        if before != after:
            changes["virtualClusters"] = [sorted(before), sorted(after)]
    if storages is not None:
        before = set(group.storage_grants.values_list("storage__name", flat=True))
        group.storage_grants.exclude(storage__in=storages).delete()
        for storage in storages:
            StorageGrant.objects.get_or_create(storage=storage, group=group)
        after = {s.name for s in storages}
        if before != after:
            changes["storageConfigs"] = [sorted(before), sorted(after)]
    return changes


@transaction.atomic
def create_group(actor, *, name, tenant, description="", external_name="", virtual_clusters=(), storages=()):
    from django.contrib.auth.models import Group as AuthGroup

    if AuthGroup.objects.filter(name=name).exists():
        raise IntegrityError(f"Group {name} already exists.")
    _check_grants(tenant, virtual_clusters, storages)
    group = Group(name=name, tenant=tenant, description=description, external_name=external_name)
    group.full_clean(exclude=["permissions"])
    group.save()
    grants = _set_grants(group, list(virtual_clusters), list(storages))
    record(
        actor,
        "group.create",
        group,
        changes={"description": description, "externalName": external_name, **grants},
    )
    return group


@transaction.atomic
def update_group(actor, group, *, description=UNSET, external_name=UNSET, virtual_clusters=None, storages=None):
    changes = {}
    if description is not UNSET and description != group.description:
        changes["description"] = [group.description, description]
        group.description = description
    if external_name is not UNSET and external_name != group.external_name:
        if group.is_builtin:
            raise ValidationError({"externalName": f"The built-in group {group.name} has no external name."})
        changes["externalName"] = [group.external_name, external_name]
        group.external_name = external_name
    if virtual_clusters is not None or storages is not None:
        if group.tenant is None:
            raise ValidationError(
                {"extension.acls": f"Grant to the built-in group {group.name} in the admin, not through the API."}
            )
        _check_grants(group.tenant, virtual_clusters or (), storages or ())
    group.full_clean(exclude=["permissions"], validate_unique=True)
    group.save()
    changes.update(_set_grants(group, virtual_clusters, storages))
    record(actor, "group.update", group, changes=changes)
    return group


@transaction.atomic
def delete_group(actor, group):
    if group.is_builtin:
        raise ValidationError({"groupname": f"The built-in group {group.name} cannot be deleted."})
    record(actor, "group.delete", group, changes={"name": group.name})
    group.delete()
