from django.db import models

from ..choices import NotificationEvent


class JobNotification(models.Model):
    """One e-mail about one transition of a job (OpenPAI's `extras.jobStatusChangeNotification`).

    The row is written in the transaction of the transition; the unique key (job, attempt,
    event) makes a transition notify once, and `sent_at`, set under a row lock when the
    e-mail has gone, keeps a task delivered twice from sending twice.
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="notifications")
    attempt_index = models.IntegerField(help_text="The attempt the transition belongs to; -1 before any attempt.")
    event = models.CharField(max_length=16, choices=NotificationEvent.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    sent_to = models.EmailField(blank=True)

    class Meta:
        ordering = ["job", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "attempt_index", "event"], name="unique_job_notification"),
        ]
        indexes = [models.Index(fields=["sent_at", "created_at"], name="job_notification_unsent")]

    def __str__(self):
        return f"{self.job_id} #{self.attempt_index} {self.event}"
