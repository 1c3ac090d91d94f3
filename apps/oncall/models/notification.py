from django.db import models

from ..choices import NotificationKind


class Notification(models.Model):
    """An e-mail pai sent on its own (reminder, escalation, handoff), once per key.

    The unique key (e.g. `incident:7:ack:<deadline>:remind`) is what makes the sweep
    idempotent: a second run finds the row and sends nothing.
    """

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=NotificationKind.choices)
    incident = models.ForeignKey("oncall.Incident", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications")
    follow_up = models.ForeignKey("oncall.FollowUp", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications")
    rotation = models.ForeignKey("oncall.Rotation", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications")
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=255)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at", "-id"]

    def __str__(self):
        return self.key
