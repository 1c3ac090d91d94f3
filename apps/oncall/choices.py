from django.db import models


class Severity(models.IntegerChoices):
    SEV0 = 0, "0 — a whole production cluster is unavailable"
    SEV1 = 1, "1 — an important feature is down (cannot submit jobs, API fails entirely, web UI down)"
    SEV2 = 2, "2 — some jobs fail consistently or some users hit problems frequently"
    SEV3 = 3, "3 — random job failures with low probability"


class IncidentStatus(models.TextChoices):
    TRIGGERED = "triggered", "Triggered"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    MITIGATED = "mitigated", "Mitigated"
    RESOLVED = "resolved", "Resolved"
    CLOSED = "closed", "Closed"


# Statuses in which an alert group still joins the incident and the SLA clocks run.
OPEN_STATUSES = (IncidentStatus.TRIGGERED, IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED)


class IncidentSource(models.TextChoices):
    ALERT = "alert", "Alert"
    USER = "user", "User report"
    DRI = "dri", "DRI"


class TimelineKind(models.TextChoices):
    OPENED = "opened", "Opened"
    TRANSITION = "transition", "State change"
    UPDATE = "update", "Update"
    ALERT_FIRING = "alert_firing", "Alert firing"
    ALERT_RESOLVED = "alert_resolved", "Alert resolved"
    SEVERITY = "severity", "Severity confirmed"
    REVIEW = "review", "Review"
    SLA = "sla", "SLA"


class AlertStatus(models.TextChoices):
    FIRING = "firing", "Firing"
    RESOLVED = "resolved", "Resolved"


class Weekday(models.IntegerChoices):
    MONDAY = 0, "Monday"
    TUESDAY = 1, "Tuesday"
    WEDNESDAY = 2, "Wednesday"
    THURSDAY = 3, "Thursday"
    FRIDAY = 4, "Friday"
    SATURDAY = 5, "Saturday"
    SUNDAY = 6, "Sunday"


class NotificationKind(models.TextChoices):
    REMIND = "remind", "Reminder to assignees"
    ESCALATE_DRI = "escalate_dri", "Escalation to the other DRI"
    ESCALATE_ADMINS = "escalate_admins", "Escalation to team admins"
    FOLLOW_UP = "follow_up", "Overdue follow-up"
    HANDOFF = "handoff", "Shift handoff"
    PAGE = "page", "Page: incident opened or severity raised"
    DUE_SOON = "due_soon", "Reminder before a deadline"


class ChatFormat(models.TextChoices):
    SLACK = "slack", "Slack-compatible (Slack, Mattermost, Rocket.Chat)"
    TEAMS = "teams", "Microsoft Teams (MessageCard)"
