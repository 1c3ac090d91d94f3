from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_save
from django.dispatch import receiver

from . import lockout
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
    lockout.register_success(user.get_username())
