"""Audit rows for what happens outside pai's services: sign-ins and sign-outs (every path:
API, sign-in page, admin, OIDC), object permissions assigned or removed through
django-guardian whoever assigns them (the sharing services, guardian's admin pages), and
the admin changes of ModelAdmins that do not audit themselves."""

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from guardian.models.models import BaseObjectPermission

from apps.tenants.admin_mixins import AuditedAdminMixin
from pai.security import client_address, current_user

from .services import is_recorded_by_service, record


@receiver(user_logged_in, dispatch_uid="pai-audit-login")
def audit_login(sender, request, user, **kwargs):
    record(user, "auth.login", user, changes={"address": client_address(request)})


@receiver(user_login_failed, dispatch_uid="pai-audit-login-failed")
def audit_login_failed(sender, credentials, request=None, **kwargs):
    # `credentials` arrives with the password already masked; only the name is kept.
    username = str(credentials.get("username") or "")[:150]
    record(
        None,
        "auth.login_failed",
        object_type="auth.user",
        object_repr=username,
        changes={"username": username, "address": client_address(request)},
    )


@receiver(user_logged_out, dispatch_uid="pai-audit-logout")
def audit_logout(sender, request, user, **kwargs):
    if user is not None:
        record(user, "auth.logout", user, changes={"address": client_address(request)})


def _permission_changes(instance):
    holder = getattr(instance, "user", None) or getattr(instance, "group", None)
    return {
        "permission": instance.permission.codename,
        "holder_type": "user" if getattr(instance, "user_id", None) else "group",
        "holder": str(holder),
    }


def _target(instance):
    return instance.content_object


@receiver(post_save, dispatch_uid="pai-audit-object-permission-grant")
def audit_permission_granted(sender, instance, created, raw=False, **kwargs):
    if raw or not created or not isinstance(instance, BaseObjectPermission) or is_recorded_by_service("permission"):
        return
    record(current_user(), "permission.grant", _target(instance), changes=_permission_changes(instance))


@receiver(post_delete, dispatch_uid="pai-audit-object-permission-revoke")
def audit_permission_revoked(sender, instance, **kwargs):
    if not isinstance(instance, BaseObjectPermission) or is_recorded_by_service("permission"):
        return
    target = _target(instance)
    if target is None:
        # The object itself is being deleted (cascade): its own deletion is audited.
        return
    record(current_user(), "permission.revoke", target, changes=_permission_changes(instance))


_LOG_ACTIONS = {ADDITION: "add", CHANGE: "change", DELETION: "delete"}


@receiver(post_save, sender=LogEntry, dispatch_uid="pai-audit-admin-log-entry")
def audit_admin_log_entry(sender, instance, created, raw=False, **kwargs):
    """Every admin add, change and delete: the ModelAdmins built on pai's AuditedAdminMixin
    write their own rows; this one writes them for the rest (django-q's, on-call's...).

    Django writes a deletion of several objects at once with bulk_create, which sends no
    signal: such deletions are audited only by AuditedAdminMixin admins.
    """
    if raw or not created:
        return
    model = instance.content_type.model_class() if instance.content_type_id else None
    if model is None or isinstance(admin.site._registry.get(model), AuditedAdminMixin):
        return
    record(
        instance.user,
        f"admin.{_LOG_ACTIONS.get(instance.action_flag, 'action')}.{model._meta.model_name}",
        object_type=model._meta.label_lower,
        object_id=instance.object_id or "",
        object_repr=instance.object_repr,
        changes={"message": instance.get_change_message()},
    )
