import hashlib

from django.conf import settings
from django.db import models

from pai.security import EncryptedJSONField

from ..choices import DEFAULT_PRIORITY_CLASS, PRIORITY_OF_CLASS, ExecutionType, JobState, JobSubState, PriorityClass
from ..querysets import JobPartQuerySet, JobQuerySet


def framework_debug_id(framework_name):
    # OpenPAI names the framework by an md5 of `user~job`; clients show it for debugging.
    return hashlib.md5(framework_name.encode(), usedforsecurity=False).hexdigest()


class Job(models.Model):
    """One submission of a job protocol v2 document by a user into a virtual cluster.

    `protocol_text` and `spec` hold the document with every secret masked; the original
    secrets live in `JobSecret`, apart, so that only the worker ever reads them.
    """

    # No single-column indexes on the foreign keys: the composite indexes of Meta (and the
    # unique owner/name constraint) lead with each of them, and every index costs a submit.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="jobs", db_index=False)
    virtual_cluster = models.ForeignKey(
        "virtualclusters.VirtualCluster", on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    name = models.CharField(max_length=255)

    protocol_text = models.TextField(help_text="The submitted document as YAML, secrets masked.")
    spec = models.JSONField(help_text="The parsed document with defaults filled in, secrets masked.")
    launch = models.JSONField(
        default=dict,
        help_text="Per task role: rendered commands, image, SKU and leaf cells; what the worker runs.",
    )
    warnings = models.JSONField(default=list, blank=True)

    priority_class = models.CharField(max_length=8, choices=PriorityClass.choices, default=DEFAULT_PRIORITY_CLASS)
    priority = models.IntegerField(default=PRIORITY_OF_CLASS[DEFAULT_PRIORITY_CLASS])
    gang_allocation = models.BooleanField(default=True)

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.WAITING)
    sub_state = models.CharField(
        max_length=32, choices=JobSubState.choices, default=JobSubState.ATTEMPT_CREATION_PENDING
    )
    execution_type = models.CharField(max_length=8, choices=ExecutionType.choices, default=ExecutionType.START)

    # FrameworkController's maxRetryCount: -1 retries failures without limit, -2 even successes.
    job_retry_count = models.IntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    retries_user = models.PositiveIntegerField(default=0)
    retries_platform = models.PositiveIntegerField(default=0)
    retries_resource = models.PositiveIntegerField(default=0)

    submitted_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(null=True, blank=True, help_text="When the current attempt was created.")
    launched_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    app_exit_code = models.IntegerField(null=True, blank=True)
    # A stop pai decided itself (the idle-GPU rule): the exit code and reason the job ends
    # with, in place of a user's stop (-210).
    stop_exit_code = models.IntegerField(null=True, blank=True)
    stop_reason = models.CharField(max_length=500, blank=True)

    total_gpu = models.PositiveIntegerField(default=0)
    total_tasks = models.PositiveIntegerField(default=0)
    total_task_roles = models.PositiveIntegerField(default=0)
    # What the job's leaf cells amount to once placed (cells × SKU), in OpenPAI's units:
    # a VC's `resourcesUsed` sums these over the jobs holding cells.
    cell_cpu = models.FloatField(default=0)
    cell_memory_mb = models.PositiveBigIntegerField(default=0)
    cell_gpu = models.PositiveIntegerField(default=0)
    leaf_cells = models.JSONField(default=dict, help_text="Leaf cells the whole job needs, per SKU.")

    # Filled by the scheduler.
    placement = models.JSONField(null=True, blank=True, help_text="Cells the scheduler placed the job on.")
    reservation = models.JSONField(
        null=True, blank=True,
        help_text="While the job waits for the jobs it preempts to stop: the cells it holds meanwhile.",
    )
    wait_reason = models.TextField(blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_job_name_per_owner")]
        indexes = [
            models.Index(fields=["-submitted_at", "-id"], name="job_submitted"),
            models.Index(fields=["tenant", "-submitted_at"], name="job_tenant_submitted"),
            models.Index(fields=["virtual_cluster", "state"], name="job_vc_state"),
            models.Index(fields=["state", "-submitted_at"], name="job_state_submitted"),
            models.Index(fields=["owner", "-submitted_at"], name="job_owner_submitted"),
            # The scheduler's queue, small whatever the history: what each cycle and each
            # metrics scrape read.
            models.Index(
                fields=["virtual_cluster", "submitted_at"],
                condition=models.Q(state=JobState.WAITING, placement__isnull=True, execution_type=ExecutionType.START),
                name="job_queue",
            ),
            # The jobs holding or reserving cells, small whatever the history: what a page
            # that rebuilds the engine (apps/virtualclusters/status.py) and the worker's
            # restore read. A submitted job is not in it (neither is set yet).
            models.Index(
                fields=["virtual_cluster"],
                condition=models.Q(placement__isnull=False) | models.Q(reservation__isnull=False),
                name="job_placed",
            ),
        ]

    def __str__(self):
        return self.framework_name

    @property
    def framework_name(self):
        return f"{self.owner.username}~{self.name}"

    @property
    def debug_id(self):
        return framework_debug_id(self.framework_name)

    @property
    def created_time(self):
        # OpenPAI always reports a creation time; before the first attempt it is the submission.
        return self.created_at or self.submitted_at

    @property
    def retry_details(self):
        return {"user": self.retries_user, "platform": self.retries_platform, "resource": self.retries_resource}


class JobSecret(models.Model):
    """The job's secrets as submitted, kept apart from everything that is shown.

    `values` is the document's `secrets` map; `image_auth` the resolved registry
    credentials per dockerimage prerequisite. Only the worker reads this row. Both are
    encrypted at rest (`PAI_SECRETS_KEY`): the columns hold Fernet tokens, the
    attributes the plain maps.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="secret")
    values = EncryptedJSONField(default=dict)
    image_auth = EncryptedJSONField(default=dict)

    objects = JobPartQuerySet.as_manager()

    def __str__(self):
        return f"secrets of {self.job_id}"


class JobTag(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=255)

    objects = JobPartQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="unique_job_tag")]
        indexes = [models.Index(fields=["name"], name="job_tag_name")]

    def __str__(self):
        return self.name
