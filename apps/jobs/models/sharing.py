"""Per-object shares of a job (django-guardian, direct foreign keys).

A job shared with a named user (permission `view_job`) is readable by them: detail,
config, attempts, events, logs; never stoppable or taggable. Grant and revoke through
`apps.accounts.sharing`.
"""

from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase


class JobUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="user_shares")


class JobGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="group_shares")
