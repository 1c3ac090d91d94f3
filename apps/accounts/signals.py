from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

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
