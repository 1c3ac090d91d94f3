from django.db import models
from django.utils import timezone

from ..choices import JobState, JobSubState
from ..querysets import JobPartQuerySet, TaskAttemptQuerySet, TaskQuerySet


class JobAttempt(models.Model):
    """One run of the whole job; retries start a new attempt."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="attempts")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.WAITING)
    sub_state = models.CharField(
        max_length=32, choices=JobSubState.choices, default=JobSubState.ATTEMPT_CREATION_PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_spec_code = models.IntegerField(null=True, blank=True, help_text="The matched exit spec row.")
    exit_diagnostics = models.TextField(blank=True)
    exit_trigger_message = models.TextField(blank=True, help_text="Why the attempt ended (OpenPAI's "
                                            "appExitTriggerMessage).")
    trigger_task_role = models.CharField(max_length=255, blank=True)
    trigger_task_index = models.PositiveIntegerField(null=True, blank=True)

    objects = JobPartQuerySet.as_manager()

    class Meta:
        ordering = ["job", "-index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_job_attempt_index")]

    def __str__(self):
        return f"{self.job_id}#{self.index}"


class Task(models.Model):
    """One instance of a task role within a job attempt."""

    job_attempt = models.ForeignKey(JobAttempt, on_delete=models.CASCADE, related_name="tasks")
    task_role = models.CharField(max_length=255)
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.WAITING)
    retries = models.PositiveIntegerField(default=0)
    accountable_retries = models.PositiveIntegerField(
        default=0, help_text="Retries that used up taskRetryCount (transient failures do not)."
    )

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["job_attempt", "task_role", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job_attempt", "task_role", "index"], name="unique_task_per_attempt")
        ]

    def __str__(self):
        return f"{self.task_role}[{self.index}]"


class TaskAttempt(models.Model):
    """One pod of a task. Pod names are deterministic, so at most one pod exists per row."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="attempts")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.WAITING)
    pod_name = models.CharField(max_length=253, blank=True)
    pod_uid = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    device_indices = models.JSONField(default=list, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    ports = models.JSONField(default=dict, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_spec_code = models.IntegerField(null=True, blank=True)
    diagnostics = models.TextField(blank=True)
    log_path = models.CharField(
        max_length=1024, blank=True, help_text="Where the backend wrote this pod's log, once it has."
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = TaskAttemptQuerySet.as_manager()

    class Meta:
        ordering = ["task", "index"]
        constraints = [
            models.UniqueConstraint(fields=["task", "index"], name="unique_task_attempt_index"),
            models.UniqueConstraint(fields=["pod_name"], condition=~models.Q(pod_name=""), name="unique_pod_name"),
        ]

    def __str__(self):
        return self.pod_name or f"{self.task}#{self.index}"


class TaskLog(models.Model):
    """The end of a task attempt's log, kept by the worker when its pod ends: Kubernetes
    keeps no log of a deleted pod, and the worker deletes every finished pod."""

    task_attempt = models.OneToOneField(TaskAttempt, on_delete=models.CASCADE, primary_key=True, related_name="kept_log")
    text = models.TextField(blank=True)
    truncated = models.BooleanField(default=False, help_text="Only the end of a longer log is kept.")
    stored_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"log of {self.task_attempt_id}"
