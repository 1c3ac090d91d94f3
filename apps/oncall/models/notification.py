from django.db import models

from pai.security import EncryptedJSONField

from ..choices import ChatFormat, NotificationKind


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


class ChatWebhook(models.Model):
    """A chat channel's incoming webhook that DRIs are paged in (Slack- or Teams-compatible).

    The URL is a credential (whoever has it posts to the channel): it is stored encrypted
    (`PAI_SECRETS_KEY`) and never shown again after it is saved.
    """

    name = models.CharField(max_length=100, unique=True)
    format = models.CharField(max_length=10, choices=ChatFormat.choices, default=ChatFormat.SLACK)
    secret = EncryptedJSONField(default=dict, editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def url(self):
        return self.secret.get("url", "")

    @url.setter
    def url(self, value):
        self.secret = {"url": value}
