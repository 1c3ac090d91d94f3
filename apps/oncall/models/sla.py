from datetime import time, timedelta

from django.core.exceptions import ValidationError
from django.db import models

from apps.clusters.choices import ClusterClass

from .. import clock
from ..choices import Severity


def validate_severities(value):
    if not isinstance(value, list) or not value or not all(v in Severity.values for v in value):
        raise ValidationError("Severities are a non-empty list of 0, 1, 2, 3.")


class SlaPolicy(models.Model):
    """One row of the SLA table: (severities, cluster class) → deadlines and the calendar they run in.

    Incidents copy the matching row when they open, so editing a row never moves a
    running clock.
    """

    name = models.CharField(max_length=100, unique=True)
    severities = models.JSONField(validators=[validate_severities], help_text="Severities this row covers, e.g. [0, 1].")
    cluster_class = models.CharField(
        max_length=16, choices=ClusterClass.choices, blank=True, help_text="Empty: all clusters."
    )
    ack_within = models.DurationField(help_text="Acknowledge within (monitoring-hours time).")
    update_every = models.DurationField(help_text="Post an update at least this often until resolved.")
    escalate_after = models.DurationField(
        default=timedelta(minutes=30),
        help_text="After a missed deadline: escalate to the other DRI after this long, then to the team admins.",
    )
    calendar = models.ForeignKey("oncall.MonitoringCalendar", on_delete=models.PROTECT, related_name="policies")
    around_the_clock = models.BooleanField(
        default=False,
        help_text="The clocks of this row run 24 × 7 (in the calendar's zone), not only in monitoring hours.",
    )
    remind_before = models.DurationField(
        default=timedelta(minutes=10),
        help_text="Remind the assignees this long (in clock time) before each acknowledge and update deadline.",
    )
    position = models.PositiveIntegerField(default=0, help_text="Among equally specific rows, the lowest wins.")

    class Meta:
        ordering = ["position", "name"]
        verbose_name = "SLA policy"
        verbose_name_plural = "SLA policies"

    def __str__(self):
        return self.name

    def clean(self):
        for field in ("ack_within", "update_every", "escalate_after", "remind_before"):
            value = getattr(self, field)
            if value is not None and value <= timedelta(0):
                raise ValidationError({field: "Must be longer than zero."})

    def matches(self, severity, cluster_class):
        if severity not in self.severities:
            return False
        # An incident about no particular cluster may be about a production one: every row applies.
        return not self.cluster_class or not cluster_class or self.cluster_class == cluster_class

    @classmethod
    def matching(cls, severity, cluster_class):
        """The row for an incident: a class-specific row beats an all-clusters row; without a
        cluster, the row that asks for the fastest acknowledgement."""
        rows = [p for p in cls.objects.select_related("calendar") if p.matches(severity, cluster_class)]
        if cluster_class:
            rows.sort(key=lambda p: (not p.cluster_class, p.position, p.name))
        else:
            rows.sort(key=lambda p: (p.ack_within, p.position, p.name))
        return rows[0] if rows else None

    def _clock(self):
        if self.around_the_clock:
            return clock.MonitoringCalendar(zone=self.calendar.timezone, weekdays=frozenset(range(7)), start=time(0), end=time(0))
        return self.calendar.as_clock()

    def snapshot(self):
        return {
            "policy_id": self.pk,
            "name": self.name,
            "ack_within_seconds": int(self.ack_within.total_seconds()),
            "update_every_seconds": int(self.update_every.total_seconds()),
            "escalate_after_seconds": int(self.escalate_after.total_seconds()),
            "remind_before_seconds": int(self.remind_before.total_seconds()),
            "calendar": self._clock().to_dict() | {"name": "24 × 7" if self.around_the_clock else self.calendar.name},
        }
