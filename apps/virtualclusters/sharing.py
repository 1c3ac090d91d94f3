"""Per-object shares of a virtual cluster (django-guardian, direct foreign keys).

A VC shared with a group of another tenant (permission `view_virtualcluster` on the VC)
lets the members of that group see it and submit jobs to it, as a grant does inside the
VC's own tenant. Grant and revoke through `apps.accounts.sharing`.
"""

from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase


class VirtualClusterUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey("virtualclusters.VirtualCluster", on_delete=models.CASCADE,
                                       related_name="user_shares")


class VirtualClusterGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey("virtualclusters.VirtualCluster", on_delete=models.CASCADE,
                                       related_name="group_shares")
