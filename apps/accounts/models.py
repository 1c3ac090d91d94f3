from django.conf import settings
from django.contrib.auth import models as auth_models
from django.db import models
from django.utils import timezone

from apps.tenants.querysets import TenantOwnedQuerySet

from .roles import ADMIN_GROUP, DEFAULT_GROUP, is_platform_admin, member_tenant_ids

BUILTIN_GROUPS = (DEFAULT_GROUP, ADMIN_GROUP)


class GroupQuerySet(TenantOwnedQuerySet):
    def visible_to(self, user):
        # Members also see the built-in groups, which belong to no tenant.
        if is_platform_admin(user):
            return self.all()
        return self.filter(models.Q(tenant__in=member_tenant_ids(user)) | models.Q(tenant__isnull=True))


class Group(auth_models.Group):
    """A pai group: a Django group with a tenant and the external (OIDC/AAD) group it mirrors.

    Access to virtual clusters and storage is granted to groups. The built-in `default`
    group holds every user; `admingroup` makes platform admins. Both belong to no tenant.
    """

    tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="groups"
    )
    external_name = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The identity provider's group this one mirrors (OIDC mode syncs membership from it).",
    )
    description = models.TextField(blank=True)
    is_builtin = models.BooleanField(default=False, editable=False)

    objects = GroupQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["external_name"], condition=~models.Q(external_name=""), name="unique_group_external_name"
            ),
        ]

    def __str__(self):
        return self.name


class ApiTokenQuerySet(models.QuerySet):
    def live(self, now=None):
        now = now or timezone.now()
        return self.filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))


class ApiToken(models.Model):
    """A bearer token of the OpenPAI API: a login token (expires) or an application token (does not).

    Only a SHA-256 digest of the token is stored; `prefix`, the token's first characters,
    finds the row and names the token in listings without revealing it.
    """

    PREFIX_LENGTH = 12

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    application = models.BooleanField(default=False, help_text="Application tokens never expire; revoke them by hand.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        kind = "application" if self.application else "login"
        return f"{kind} token {self.prefix}… of {self.user}"


def validate_time_zone(value):
    from zoneinfo import available_timezones

    from django.core.exceptions import ValidationError

    if value and value not in available_timezones():
        raise ValidationError(f"{value} is not a time zone of the IANA database (e.g. Europe/Paris).")


class UserProfile(models.Model):
    """What pai keeps about a user beyond Django's user: OpenPAI's free-form `extension`,
    and the user's preferences: default VC, and the time zone pages show times in (empty: the
    platform's `TIME_ZONE`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pai_profile")
    extension = models.JSONField(default=dict, blank=True)
    default_virtual_cluster = models.ForeignKey(
        "virtualclusters.VirtualCluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Where a job naming no VC goes, while the user may still submit there "
        "(`apps.jobs.services.default_virtual_cluster`); empty: the first VC granted to their groups, by name.",
    )
    time_zone = models.CharField(max_length=64, blank=True, default="", validators=[validate_time_zone],
                                 help_text="Pages show times in this zone (IANA name, e.g. Asia/Tokyo); empty: the "
                                 "platform's.")

    def __str__(self):
        return f"profile of {self.user}"


class LoginThrottle(models.Model):
    """Failed password logins counted for one scope — a user name from one address, a user
    name from anywhere, or an address for any name — and the lockout they caused
    (`lockout.py`). `key` is a digest of the scope, so that user names need no escaping
    and unknown names are counted like real ones."""

    key = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    window_ends = models.DateTimeField(db_index=True)
    # Lockouts of this scope so far: each per-user lockout lasts twice the one before.
    strikes = models.PositiveIntegerField(default=0)
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.failures} failed logins ({self.key[:12]}…)"


class KnownLoginAddress(models.Model):
    """An address a user signed in from with their password: a lockout caused by failures
    elsewhere never keeps them out from here."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="known_login_addresses")
    address = models.CharField(max_length=64)
    last_login_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "address"], name="unique_known_login_address")]

    def __str__(self):
        return f"{self.user} from {self.address}"
