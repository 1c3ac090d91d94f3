from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from .choices import IdleGpuAction, MembershipRole, OnboardingEmailStatus
from .mailtemplate import validate_text
from .querysets import TenantOwnedQuerySet, TenantQuerySet


# Throttle rates: requests per second, minute, hour or day, and optionally the burst a member
# may send at once before the rate applies (apps/jobs/api/throttles.py).
rate_validator = RegexValidator(
    r"^[1-9][0-9]{0,8}/(s|sec|second|m|min|minute|h|hour|d|day)( burst [1-9][0-9]{0,8})?$",
    "A number of requests per second, minute, hour or day, such as 50/second, optionally with a burst, "
    "such as 20/second burst 300.",
)


class Tenant(models.Model):
    """A team sharing the farm: owns groups, VCs, storage grants and its own policies."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    contact_email = models.EmailField(blank=True, help_text="Where members reach the team's admins.")
    job_retention_days = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Completed jobs older than this are deleted, with their logs.",
    )
    idle_gpu_threshold_percent = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="A job whose GPUs stay below this utilisation is idle.",
    )
    idle_gpu_hours = models.PositiveIntegerField(
        default=24, validators=[MinValueValidator(1)], help_text="How long a job may stay idle before the action."
    )
    idle_gpu_action = models.CharField(max_length=16, choices=IdleGpuAction.choices, default=IdleGpuAction.NOTIFY)
    idle_gpu_grace_hours = models.PositiveIntegerField(
        default=12, validators=[MinValueValidator(1), MaxValueValidator(24 * 90)],
        help_text="Hours between the owner's warning and the action (the team admins told, or the job stopped).",
    )
    onboarding_email_subject = models.CharField(max_length=200, blank=True)
    onboarding_email_template = models.TextField(
        blank=True,
        validators=[validate_text],
        help_text="The onboarding e-mail's text with {{ placeholders }}; empty uses pai's default text.",
    )
    job_submit_rate = models.CharField(
        max_length=40, blank=True, validators=[rate_validator],
        help_text="Job submissions a member may send (such as 20/second burst 300: 300 at once, then 20 a "
        "second); empty: the site's PAI_THROTTLE_JOB_SUBMIT.",
    )
    job_list_rate = models.CharField(
        max_length=40, blank=True, validators=[rate_validator],
        help_text="Job lists a member may ask for (such as 20/second); empty: the site's PAI_THROTTLE_JOB_LIST.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def tenant(self):
        # Lets generic scoping and audit code treat a tenant as owned by itself.
        return self


class MembershipQuerySet(TenantOwnedQuerySet):
    pass


class Membership(models.Model):
    Role = MembershipRole

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=MembershipRole.choices, default=MembershipRole.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="unique_membership")]

    def __str__(self):
        return f"{self.user} in {self.tenant} ({self.get_role_display()})"


class OnboardingEmail(models.Model):
    """The welcome e-mail of one membership: sent by a task after the onboarding commits.

    The row is what makes sending idempotent and retried: a task sends only a row still
    queued or failed (locked while it sends), marks it sent, and a periodic task re-queues
    rows whose task was lost or failed (`apps.tenants.tasks`).
    """

    Status = OnboardingEmailStatus

    membership = models.OneToOneField(Membership, on_delete=models.CASCADE, related_name="onboarding_email")
    status = models.CharField(max_length=16, choices=OnboardingEmailStatus.choices, default=OnboardingEmailStatus.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    # pai's address when the e-mail was asked for: in development, the onboarding request's.
    base_url = models.CharField(max_length=500)

    class Meta:
        indexes = [models.Index(fields=["status", "queued_at"])]

    def __str__(self):
        return f"onboarding e-mail of {self.membership.user}: {self.get_status_display()}"
