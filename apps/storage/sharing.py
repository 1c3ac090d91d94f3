"""Per-object shares of a storage config (django-guardian, direct foreign keys).

A storage shared with a group of another tenant (permission `view_storageconfig`) lets
the members of that group see it and mount it in their jobs. Grant and revoke through
`apps.accounts.sharing`.
"""

from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase


class StorageConfigUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey("storage.StorageConfig", on_delete=models.CASCADE, related_name="user_shares")


class StorageConfigGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey("storage.StorageConfig", on_delete=models.CASCADE, related_name="group_shares")
