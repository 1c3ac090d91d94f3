from django.db import models


class MembershipRole(models.TextChoices):
    MEMBER = "member", "Member"
    ADMIN = "admin", "Team admin"


class IdleGpuAction(models.TextChoices):
    NONE = "none", "Do nothing"
    NOTIFY = "notify", "E-mail the job owner, then the team admins"
    STOP = "stop", "E-mail the job owner, then stop the job"


class OnboardingEmailStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed (retried)"
    ABANDONED = "abandoned", "Not sent (gave up; resend it)"
