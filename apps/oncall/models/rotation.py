from datetime import date, time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .. import shifts
from ..choices import Weekday
from ..querysets import RotationQuerySet
from .calendar import validate_zone


class Rotation(models.Model):
    """A team's on-call rotation: members take shifts in order, one or two at a time.

    A rotation without a tenant belongs to the platform team; its members are the DRIs
    who handle incidents.
    """

    name = models.CharField(max_length=100, unique=True)
    tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="rotations",
        help_text="Empty: the platform team's rotation.",
    )
    description = models.TextField(blank=True)
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_zone])
    start_date = models.DateField(default=date.today, help_text="The first shift starts on the first handoff weekday from here.")
    handoff_weekday = models.PositiveSmallIntegerField(choices=Weekday.choices, default=Weekday.MONDAY)
    handoff_time = models.TimeField(default=time(10, 0), help_text="Wall-clock time in the rotation's zone.")
    shift_days = models.PositiveSmallIntegerField(
        default=7, validators=[MinValueValidator(1), MaxValueValidator(366)], help_text="Shift length in days."
    )
    dris_per_shift = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(2)]
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RotationQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(dris_per_shift__in=[1, 2]), name="rotation_one_or_two_dris"
            ),
        ]

    def __str__(self):
        return self.name

    def plan(self):
        """The pure-arithmetic view of this rotation, over member user ids."""
        members = tuple(m.user_id for m in self.members.all())
        return shifts.RotationPlan(
            zone=self.timezone,
            first_day=shifts.first_handoff_day(self.start_date, self.handoff_weekday),
            handoff=self.handoff_time,
            shift_days=self.shift_days,
            members=members,
            dris_per_shift=self.dris_per_shift,
        )

    def plan_overrides(self):
        return tuple(
            shifts.Override(o.starts_at, o.ends_at, o.replaces_id, o.user_id) for o in self.overrides.all()
        )


class RotationMember(models.Model):
    rotation = models.ForeignKey(Rotation, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rotation_memberships")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["rotation", "user"], name="unique_rotation_member")]

    def __str__(self):
        return f"{self.user} in {self.rotation}"


class RotationOverride(models.Model):
    """`user` covers for `replaces` over a date range (a swap is two overrides)."""

    rotation = models.ForeignKey(Rotation, on_delete=models.CASCADE, related_name="overrides")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rotation_overrides",
        help_text="Who takes the shift.",
    )
    replaces = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rotation_overridden",
        help_text="The scheduled DRI who is covered for.",
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["starts_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(ends_at__gt=models.F("starts_at")), name="override_ends_after_start"),
        ]

    def __str__(self):
        return f"{self.user} for {self.replaces} ({self.starts_at:%Y-%m-%d} – {self.ends_at:%Y-%m-%d})"

    def clean(self):
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "An override must end after it starts."})
        if self.user_id and self.user_id == self.replaces_id:
            raise ValidationError({"user": "Someone cannot cover for themselves."})
