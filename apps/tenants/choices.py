from django.db import models


class MembershipRole(models.TextChoices):
    MEMBER = "member", "Member"
    ADMIN = "admin", "Team admin"


class IdleGpuAction(models.TextChoices):
    NONE = "none", "Do nothing"
    NOTIFY = "notify", "E-mail the job owner"
    STOP = "stop", "Notify, then stop the job"
