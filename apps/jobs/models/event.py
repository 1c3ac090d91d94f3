from django.db import models

from ..choices import EventType
from ..querysets import JobPartQuerySet


class JobEvent(models.Model):
    """A Kubernetes event about one of the job's pods, as `GET .../events` returns it."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="events")
    task_attempt = models.ForeignKey(
        "jobs.TaskAttempt", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    uid = models.CharField(max_length=64, blank=True, help_text="The Kubernetes event's uid.")
    pod_uid = models.CharField(max_length=64, blank=True)
    task_role = models.CharField(max_length=255, blank=True)
    task_index = models.PositiveIntegerField(null=True, blank=True)
    type = models.CharField(max_length=16, choices=EventType.choices, default=EventType.NORMAL)
    reason = models.CharField(max_length=255, blank=True)
    message = models.TextField(blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    count = models.PositiveIntegerField(default=1)
    source_component = models.CharField(max_length=255, blank=True)
    source_host = models.CharField(max_length=253, blank=True)

    objects = JobPartQuerySet.as_manager()

    class Meta:
        ordering = ["job", "last_seen", "id"]
        indexes = [models.Index(fields=["job", "type"], name="job_event_type")]

    def __str__(self):
        return f"{self.type} {self.reason}"
