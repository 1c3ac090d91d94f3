from django.db import models

from apps.jobs.models import Job


class WorkerFigures(models.Model):
    """What the scheduler loop counted, published for every web process's `/metrics`.

    One row per publisher (`scheduler`), rewritten under a row lock by the process that
    holds the scheduler lease. `data` holds cumulative counters, histograms and gauges
    by metric name and label set (see `apps.monitoring.figures`).
    """

    key = models.CharField(max_length=64, primary_key=True)
    data = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "worker figures"

    def __str__(self):
        return self.key


class UtilizationSource(models.TextChoices):
    PROMETHEUS = "prometheus", "GPU, from Prometheus (DCGM exporter)"
    NVIDIA_SMI = "nvidia-smi", "GPU, from nvidia-smi"
    CPU = "cpu", "CPU of the task's processes (no GPU figure)"


class TaskUtilization(models.Model):
    """What one task attempt (one pod) used, sampled by the worker (`apps.monitoring.efficiency`).

    `percent` is the GPU utilisation of the pod's GPUs (their mean), or, where no GPU
    figure exists (a local box without nvidia-smi), the CPU use of the task's processes
    in % of one core. The row keeps the last figure, the mean over the attempt and the
    most recent samples (bounded).
    """

    Source = UtilizationSource

    task_attempt = models.OneToOneField(
        "jobs.TaskAttempt", on_delete=models.CASCADE, primary_key=True, related_name="utilization"
    )
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=16, choices=UtilizationSource.choices)
    percent = models.FloatField(help_text="The last sample.")
    percent_sum = models.FloatField(default=0)
    samples = models.PositiveIntegerField(default=0)
    first_sampled_at = models.DateTimeField()
    last_sampled_at = models.DateTimeField()
    # CPU seconds of the task's processes at the last sample and when it was read (real
    # time): the next sample's CPU % is the difference over the interval.
    cpu_seconds = models.FloatField(null=True, blank=True)
    cpu_read_at = models.FloatField(null=True, blank=True)
    recent = models.JSONField(default=list, blank=True, help_text="The latest samples, [unix time, %].")

    class Meta:
        indexes = [models.Index(fields=["job"], name="task_utilization_job")]

    def __str__(self):
        return f"{self.task_attempt_id}: {self.percent:.1f} % ({self.source})"

    @property
    def average_percent(self):
        return self.percent_sum / self.samples if self.samples else None


class JobGpuUse(models.Model):
    """A running job's utilisation as the idle-GPU rule sees it: the mean of its tasks'
    figures at each sample, since when it stayed low, and what the rule did about it."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, primary_key=True, related_name="gpu_use")
    attempt_index = models.IntegerField()
    source = models.CharField(max_length=16, choices=UtilizationSource.choices)
    percent = models.FloatField(help_text="The job's utilisation at the last sample (mean over its tasks).")
    percent_sum = models.FloatField(default=0)
    samples = models.PositiveIntegerField(default=0)
    sampled_at = models.DateTimeField()
    low_since = models.DateTimeField(
        null=True, blank=True, help_text="Below the team's idle threshold at every sample since then."
    )
    low_percent_sum = models.FloatField(default=0, help_text="The samples' sum since low_since.")
    low_samples = models.PositiveIntegerField(default=0)
    under_abnormal_since = models.DateTimeField(
        null=True, blank=True, help_text="Below the abnormal-job threshold (10 %) at every sample since then."
    )
    warned_at = models.DateTimeField(null=True, blank=True, help_text="The owner was warned (this idle spell).")
    escalated_at = models.DateTimeField(null=True, blank=True, help_text="The team admins were told, or the job stopped.")

    class Meta:
        verbose_name = "job GPU use"
        indexes = [models.Index(fields=["under_abnormal_since"], name="job_gpu_use_abnormal")]

    def __str__(self):
        return f"{self.job_id}: {self.percent:.1f} %"

    @property
    def average_percent(self):
        return self.percent_sum / self.samples if self.samples else None

    @property
    def low_average_percent(self):
        return self.low_percent_sum / self.low_samples if self.low_samples else None


class IdleGpuNoticeKind(models.TextChoices):
    WARNING = "warning", "Owner warned"
    ADMINS = "admins", "Team admins told"
    STOPPED = "stopped", "Owner told the job was stopped"


class IdleGpuNotice(models.Model):
    """One e-mail of the idle-GPU rule, written with the decision and sent after it commits.

    The text is rendered when the rule decides (the job's figures then); a django-q2 task
    sends it under a row lock, once, and a schedule hands out again what a lost task left
    unsent. One notice per job, idle spell (`low_since`) and kind.
    """

    Kind = IdleGpuNoticeKind

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="idle_gpu_notices")
    kind = models.CharField(max_length=16, choices=IdleGpuNoticeKind.choices)
    low_since = models.DateTimeField()
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "low_since", "kind"], name="unique_idle_gpu_notice")]
        indexes = [models.Index(fields=["sent_at", "created_at"], name="idle_gpu_notice_unsent")]

    def __str__(self):
        return f"{self.job_id} {self.kind}"


class AbnormalRunningJob(Job):
    """The Django admin's list of abnormal jobs (`apps.monitoring.abnormal`)."""

    class Meta:
        proxy = True
        verbose_name = "abnormal job"
        verbose_name_plural = "abnormal jobs"
