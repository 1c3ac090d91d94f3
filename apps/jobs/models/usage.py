from django.db import models


class JobUsage(models.Model):
    """What a deleted job used, kept for usage reports after retention removes the job.

    Names are copied, not linked: the accounting row outlives the job and may outlive
    the user or the VC.
    """

    job_id = models.BigIntegerField(unique=True, help_text="The deleted job's id.")
    username = models.CharField(max_length=150, db_index=True)
    job_name = models.CharField(max_length=255)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="job_usage")
    virtual_cluster = models.CharField(max_length=64, db_index=True)
    state = models.CharField(max_length=16)
    gpu_hours = models.FloatField(default=0)
    submitted_at = models.DateTimeField()
    launched_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-completed_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-completed_at"], name="job_usage_tenant")]

    def __str__(self):
        return f"{self.username}~{self.job_name} ({self.gpu_hours:.2f} GPU-hours)"
