"""Who sees which on-call rows. DRIs are the members of the platform's active rotations."""

from django.db import models

from apps.accounts.roles import admin_tenant_ids, is_platform_admin, member_tenant_ids


def is_dri(user):
    """Whether the user is in the platform team's rotation (on shift or not)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    cached = getattr(user, "_pai_dri", None)
    if cached is None:
        from .models import RotationMember

        cached = RotationMember.objects.filter(
            user=user, rotation__tenant__isnull=True, rotation__active=True
        ).exists()
        user._pai_dri = cached
    return cached


def is_responder(user):
    """DRIs and platform admins handle every incident."""
    return is_platform_admin(user) or is_dri(user)


class RotationQuerySet(models.QuerySet):
    def visible_to(self, user):
        # Who is on call for the platform is public to every user: they are the contact.
        if is_platform_admin(user):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        return self.filter(models.Q(tenant__isnull=True) | models.Q(tenant__in=member_tenant_ids(user)))

    def manageable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        return self.filter(tenant__in=admin_tenant_ids(user))


class IncidentQuerySet(models.QuerySet):
    def visible_to(self, user):
        if is_responder(user):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        mine = self.filter(models.Q(reporter=user) | models.Q(assignees=user)).values("pk")
        return self.filter(pk__in=mine)

    def manageable_by(self, user):
        """Incidents the user may act on: all for responders, else those assigned to them."""
        if is_responder(user):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        return self.filter(pk__in=self.filter(assignees=user).values("pk"))

    def on_status_page_of(self, user):
        """Open incidents a member sees on the status page: those on the clusters of the VCs
        they may use, and those about no particular cluster. Responders see every one."""
        from apps.virtualclusters.models import VirtualCluster

        incidents = self.open()
        if is_responder(user):
            return incidents
        if not user.is_authenticated:
            return self.none()
        clusters = VirtualCluster.objects.usable_by(user).values("cluster_id")
        return incidents.filter(models.Q(cluster__in=clusters) | models.Q(cluster__isnull=True))

    def open(self):
        from .choices import OPEN_STATUSES

        return self.filter(status__in=OPEN_STATUSES)


class AlertQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Alerts about the user's own jobs (`username`, or `job_name` = `username~job`)."""
        if is_responder(user):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        name = user.get_username()
        return self.filter(models.Q(labels__username=name) | models.Q(labels__job_name__startswith=f"{name}~"))

    def firing(self):
        from .choices import AlertStatus

        return self.filter(status=AlertStatus.FIRING)
