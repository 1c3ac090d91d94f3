from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from pai.security import current_user

from . import lockout
from .services import revoke_all_tokens
from .roles import DEFAULT_GROUP


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="pai-default-group")
def add_to_default_group(sender, instance, created, raw=False, **kwargs):
    """Every user is in the `default` group, from the moment the account exists."""
    if not created or raw:
        return
    from .models import Group

    group = Group.objects.filter(name=DEFAULT_GROUP).first()
    if group is not None:
        instance.groups.add(group)


@receiver(user_login_failed, dispatch_uid="pai-login-failure-counter")
def count_login_failure(sender, credentials, request=None, **kwargs):
    lockout.register_failure(credentials.get("username"), request)


@receiver(user_logged_in, dispatch_uid="pai-login-success-resets-counter")
def reset_login_failures(sender, request, user, **kwargs):
    lockout.register_success(user, request)


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="pai-revoke-tokens-of-changed-user")
def revoke_tokens_of_changed_user(sender, instance, created, raw=False, **kwargs):
    """Every way of setting a password (the admin, `/accounts/password_change/`, the API,
    `manage.py changepassword`) calls `set_password()` then `save()`; Django keeps the new
    raw password in `_password` until the save is done (a hash upgrade at login clears it
    before saving). A deactivated user's tokens go too."""
    if created or raw:
        return
    if getattr(instance, "_password", None) is not None:
        revoke_all_tokens(current_user(), instance, "password changed")
    elif not instance.is_active:
        revoke_all_tokens(current_user(), instance, "account deactivated")


@receiver(post_delete, sender="tenants.Membership", dispatch_uid="pai-revoke-tokens-of-removed-member")
def revoke_tokens_of_removed_member(sender, instance, **kwargs):
    """A member removed from a team loses every token: one issued for that team's work
    must not outlive the membership."""
    revoke_all_tokens(current_user(), instance.user, f"removed from team {instance.tenant}")


@receiver(user_logged_in, dispatch_uid="pai-time-zone-into-session")
def remember_time_zone(sender, request, user, **kwargs):
    """The user's zone goes into the session at sign-in: pages show times in it without a query."""
    from . import timezones

    if request is not None:
        timezones.remember(request, timezones.zone_of(user))
