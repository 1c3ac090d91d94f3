import re

from django.core.exceptions import ValidationError
from django.db import models

from ..choices import AlertStatus, Severity
from ..querysets import AlertQuerySet

MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')


def parse_matchers(text):
    """Alertmanager-style matchers, one per line: `label=value`, `!=`, `=~regex`, `!~regex`."""
    matchers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        found = MATCHER.match(line)
        if not found:
            raise ValueError(f"line {number}: expected label=value, label!=value, label=~regex or label!~regex")
        name, op, value = found.groups()
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"line {number}: bad regular expression: {exc}") from None
        matchers.append((name, op, value))
    return matchers


def labels_match(matchers, labels):
    for name, op, value in matchers:
        actual = str(labels.get(name, ""))
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
        # Alertmanager anchors regex matchers at both ends.
        if op == "=~" and not re.fullmatch(value, actual):
            return False
        if op == "!~" and re.fullmatch(value, actual):
            return False
    return True


class AlertRoute(models.Model):
    """A routing rule: alerts whose labels match get this severity, cluster and behaviour."""

    name = models.CharField(max_length=100, unique=True)
    position = models.PositiveIntegerField(default=0, help_text="Rules are tried in this order; the first match wins.")
    matchers = models.TextField(
        help_text='One per line, as in Alertmanager: alertname="NodeDown", severity=~"critical|page", team!="x".'
    )
    severity = models.PositiveSmallIntegerField(choices=Severity.choices, default=Severity.SEV2)
    cluster = models.ForeignKey(
        "clusters.Cluster", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Empty: taken from the alert's `cluster` label when it names a cluster.",
    )
    auto_mitigate = models.BooleanField(default=False, help_text="Mark the incident mitigated when all its alerts resolve.")
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self):
        return self.name

    def clean(self):
        try:
            parse_matchers(self.matchers or "")
        except ValueError as exc:
            raise ValidationError({"matchers": str(exc)}) from None

    def matches(self, labels):
        return labels_match(parse_matchers(self.matchers), labels)


class Alert(models.Model):
    """One Alertmanager alert (by fingerprint) as part of an incident."""

    incident = models.ForeignKey("oncall.Incident", on_delete=models.CASCADE, related_name="alerts")
    fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=AlertStatus.choices, default=AlertStatus.FIRING)
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    generator_url = models.URLField(max_length=1000, blank=True)
    receiver = models.CharField(max_length=200, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(auto_now=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-first_seen", "-id"]
        constraints = [models.UniqueConstraint(fields=["incident", "fingerprint"], name="unique_alert_per_incident")]

    def __str__(self):
        return self.labels.get("alertname", self.fingerprint)
