from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from .. import clock
from ..choices import OPEN_STATUSES, IncidentSource, IncidentStatus, Severity, TimelineKind
from ..querysets import IncidentQuerySet


class Incident(models.Model):
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    severity = models.PositiveSmallIntegerField(choices=Severity.choices)
    proposed_severity = models.PositiveSmallIntegerField(
        choices=Severity.choices, null=True, blank=True, help_text="What the reporter proposed (user reports)."
    )
    severity_confirmed = models.BooleanField(default=True, help_text="A DRI confirmed the severity.")
    cluster = models.ForeignKey(
        "clusters.Cluster", null=True, blank=True, on_delete=models.PROTECT, related_name="incidents"
    )
    cluster_class = models.CharField(max_length=16, blank=True, help_text="The cluster's class when the incident opened.")
    source = models.CharField(max_length=10, choices=IncidentSource.choices)
    status = models.CharField(max_length=16, choices=IncidentStatus.choices, default=IncidentStatus.TRIGGERED)
    reporter = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="reported_incidents"
    )
    assignees = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="assigned_incidents")
    rotation = models.ForeignKey(
        "oncall.Rotation", null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents",
        help_text="The rotation whose DRIs handle it (escalation goes to its other DRI and its team admins).",
    )
    # Alert grouping: one open incident per key (the partial unique constraint below).
    group_key = models.CharField(max_length=64, null=True, blank=True, editable=False)
    auto_mitigate = models.BooleanField(default=False)

    triggered_at = models.DateTimeField(default=timezone.now)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    mitigated_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    last_update_at = models.DateTimeField(null=True, blank=True)

    # The SLA row as it was when the incident opened (or its severity was confirmed).
    sla = models.JSONField(null=True, blank=True, editable=False)
    ack_deadline = models.DateTimeField(null=True, blank=True)
    next_update_deadline = models.DateTimeField(null=True, blank=True)
    ack_breached_at = models.DateTimeField(null=True, blank=True)
    update_breached_at = models.DateTimeField(null=True, blank=True, help_text="First missed update deadline.")
    update_breaches = models.PositiveIntegerField(default=0)

    # The review.
    cause = models.TextField(blank=True, help_text="Why it happened.")
    prevention = models.TextField(blank=True, help_text="How to avoid it.")
    reviewed_at = models.DateTimeField(null=True, blank=True)

    objects = IncidentQuerySet.as_manager()

    class Meta:
        ordering = ["-triggered_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group_key"],
                condition=models.Q(group_key__isnull=False, status__in=list(OPEN_STATUSES)),
                name="unique_open_incident_per_group_key",
            ),
        ]
        indexes = [models.Index(fields=["status", "triggered_at"])]

    def __str__(self):
        return f"#{self.pk} {self.title}"

    @property
    def is_open(self):
        return self.status in OPEN_STATUSES

    @property
    def breached(self):
        return bool(self.ack_breached_at or self.update_breaches)

    def sla_calendar(self):
        return clock.MonitoringCalendar.from_dict(self.sla["calendar"]) if self.sla else None

    def current_deadline(self):
        """('ack' | 'update', deadline) for the clock that runs now, or None."""
        if self.status == IncidentStatus.TRIGGERED and self.ack_deadline:
            return "ack", self.ack_deadline
        if self.status in (IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED) and self.next_update_deadline:
            return "update", self.next_update_deadline
        return None

    def countdown(self, now=None):
        """The running SLA clock for pages: kind, deadline, monitoring time left, whether it runs now."""
        current = self.current_deadline()
        if current is None:
            return None
        now = now or timezone.now()
        kind, deadline = current
        calendar = self.sla_calendar()
        left = calendar.elapsed(now, deadline) if deadline > now else timedelta(0)
        return {
            "kind": kind,
            "deadline": deadline,
            "seconds_left": int(left.total_seconds()),
            "running": calendar.is_open(now),
            "overdue": deadline <= now,
        }


class TimelineEntry(models.Model):
    """An append-only record on an incident's timeline: updates, state changes, alerts."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="timeline")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, default="system")
    kind = models.CharField(max_length=20, choices=TimelineKind.choices)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "timeline entries"

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.get_kind_display()}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Timeline entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Timeline entries are append-only.")


class FollowUp(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="follow_ups")
    title = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="follow_ups")
    due_date = models.DateField(null=True, blank=True)
    link = models.URLField(max_length=500, blank=True, help_text="The tracker issue, e.g. a GitHub or Jira link.")
    done = models.BooleanField(default=False)
    done_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Its GitHub issue (`apps/oncall/github.py`): asked for, then created by a task, retried.
    issue_repository = models.CharField(max_length=140, blank=True, editable=False)
    issue_number = models.PositiveIntegerField(null=True, blank=True, editable=False)
    issue_url = models.URLField(max_length=500, blank=True, editable=False)
    issue_state = models.CharField(max_length=10, blank=True, editable=False)
    issue_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    issue_attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    issue_retry_at = models.DateTimeField(null=True, blank=True, editable=False, db_index=True)
    issue_error = models.CharField(max_length=500, blank=True, editable=False)

    class Meta:
        ordering = ["done", "due_date", "id"]

    def __str__(self):
        return self.title
