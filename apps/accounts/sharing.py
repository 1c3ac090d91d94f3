"""Per-object sharing: a VC or a storage shared with another tenant's group, a job shared
read-only with named users.

A share is one django-guardian object permission, the model's `view_<model>` permission,
stored in the model's direct foreign-key permission table (`apps/*/sharing.py`). What it
allows is decided by the querysets that read those tables: `VirtualCluster.usable_by`,
`StorageConfig.usable_by` and `Job.readable_by`. Only platform admins and the admins of the
object's tenant (and a job's owner) may grant or revoke; every change is audited.
"""

from django.contrib.auth.models import Group as AuthGroup
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from guardian.shortcuts import assign_perm, remove_perm

from apps.audit.services import record, recorded_by_service

from .roles import admin_tenant_ids, group_ids_of, is_platform_admin

# Which models may be shared with whom: groups for VCs and storages, users for jobs.
SHARED_WITH_GROUPS = frozenset({"virtualclusters.virtualcluster", "storage.storageconfig"})
SHARED_WITH_USERS = frozenset({"jobs.job"})


def share_permission(obj):
    """The one permission a share holds on `obj`, as guardian names it (`app.codename`)."""
    return f"{obj._meta.app_label}.view_{obj._meta.model_name}"


def shared_with_groups_of(user, share_model, codename):
    """Ids of the objects shared with one of the user's groups, from a guardian direct permission table."""
    return share_model.objects.filter(group_id__in=group_ids_of(user), permission__codename=codename).values("content_object_id")


def shared_with_user(user, share_model, codename):
    """Ids of the objects shared with the user by name."""
    return share_model.objects.filter(user=user, permission__codename=codename).values("content_object_id")


def may_share(actor, obj):
    """Platform admins, the admins of the object's tenant and a job's owner grant and revoke its shares."""
    if is_platform_admin(actor) or obj.tenant_id in admin_tenant_ids(actor):
        return True
    return getattr(obj, "owner_id", None) == actor.pk


def _check(actor, obj, allowed):
    label = obj._meta.label_lower
    if label not in allowed:
        raise ValidationError({"object": f"a {obj._meta.verbose_name} cannot be shared this way"})
    if not may_share(actor, obj):
        raise PermissionDenied(f"{actor.get_username()} may not share {obj._meta.verbose_name} {obj}.")


def _auth_group(group):
    # pai's Group extends Django's; guardian's group tables point at Django's.
    return group if type(group) is AuthGroup else group.group_ptr


def _group_of_same_tenant(obj, group):
    from .models import Group

    tenant_id = Group.objects.filter(pk=group.pk).values_list("tenant_id", flat=True).first()
    return tenant_id == obj.tenant_id


@transaction.atomic
def share_with_group(actor, obj, group):
    """Let the members of `group` (usually another tenant's) see and use `obj`."""
    _check(actor, obj, SHARED_WITH_GROUPS)
    if group.name == "default" or _group_of_same_tenant(obj, group):
        # Sharing with everyone, or with the owner's own team, is what grants are for.
        raise ValidationError({"group": f"share {obj} with another team's group, not {group.name}"})
    with recorded_by_service("permission"):
        assign_perm(share_permission(obj), _auth_group(group), obj)
    record(actor, f"share.grant.{obj._meta.model_name}", obj, changes={"group": group.name})


@transaction.atomic
def unshare_with_group(actor, obj, group):
    _check(actor, obj, SHARED_WITH_GROUPS)
    with recorded_by_service("permission"):
        remove_perm(share_permission(obj), _auth_group(group), obj)
    record(actor, f"share.revoke.{obj._meta.model_name}", obj, changes={"group": group.name})


@transaction.atomic
def share_with_user(actor, obj, user):
    """Let `user` read `obj` (a job): detail, config, events, logs; nothing else."""
    _check(actor, obj, SHARED_WITH_USERS)
    if not user.is_active:
        raise ValidationError({"user": f"user {user.get_username()} is inactive"})
    with recorded_by_service("permission"):
        assign_perm(share_permission(obj), user, obj)
    record(actor, f"share.grant.{obj._meta.model_name}", obj, changes={"user": user.get_username()})


@transaction.atomic
def unshare_with_user(actor, obj, user):
    _check(actor, obj, SHARED_WITH_USERS)
    with recorded_by_service("permission"):
        remove_perm(share_permission(obj), user, obj)
    record(actor, f"share.revoke.{obj._meta.model_name}", obj, changes={"user": user.get_username()})


@transaction.atomic
def set_user_shares(actor, obj, users):
    """Make exactly `users` hold a share of `obj`; returns their usernames, sorted."""
    _check(actor, obj, SHARED_WITH_USERS)
    wanted = {u.pk: u for u in users}
    current = {row.user_id: row.user for row in obj.user_shares.select_related("user")}
    for pk in sorted(current.keys() - wanted.keys()):
        unshare_with_user(actor, obj, current[pk])
    for pk in sorted(wanted.keys() - current.keys()):
        share_with_user(actor, obj, wanted[pk])
    return sorted(u.get_username() for u in wanted.values())
