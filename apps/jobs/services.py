"""Business actions on jobs: submit, stop, tag. Each is atomic and writes an audit row."""

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.roles import group_ids_of
from apps.audit.services import record
from apps.storage.models import StorageConfig, StorageGrant
from apps.virtualclusters.capacity import submit_limits
from apps.virtualclusters.models import VirtualCluster
from pai.api.errors import PayloadTooLargeError

from . import notifications
from .choices import COMPLETED_STATES, STOP_REQUESTED_EXIT_CODE, ExecutionType, JobState, JobSubState
from .errors import ConflictJobError, ForbiddenUserError, InvalidParametersError, InvalidProtocolError
from .errors import NoVirtualClusterError
from .models import Job, JobSecret, JobTag, TaskAttempt
from .protocol import ProtocolError, parse_job, plan_leaf_cells
from .protocol.errors import ProtocolTooLargeError
from .protocol.structure import storable_text

MAX_TAG_LENGTH = 255


def default_virtual_cluster(user):
    """The user's default VC: the one they chose (`UserProfile.default_virtual_cluster`,
    set on the account page) while they may still submit there, else the first, by name,
    of the VCs granted to their groups."""
    from apps.accounts.models import UserProfile

    chosen = UserProfile.objects.filter(user_id=user.pk).values_list("default_virtual_cluster_id", flat=True).first()
    if chosen is not None:
        vc = VirtualCluster.objects.usable_by(user).filter(pk=chosen).select_related("cluster", "tenant").first()
        if vc is not None:
            return vc
    return (
        VirtualCluster.objects.filter(grants__group_id__in=group_ids_of(user))
        .select_related("cluster", "tenant")
        .order_by("name")
        .first()
    )


def _virtual_cluster_for(user, name):
    if name is None:
        vc = default_virtual_cluster(user)
        if vc is None:
            raise NoVirtualClusterError(
                f"defaults.virtualCluster: not given, and user {user.get_username()} has no virtual cluster."
            )
        return vc
    vc, usable = VirtualCluster.objects.named_for_submit(user, name)
    if usable:
        return vc
    # A VC the user sees but may not use is forbidden; another tenant's VC answers as
    # unknown, so that its existence does not leak.
    if VirtualCluster.objects.visible_to(user).filter(name=name).exists():
        raise ForbiddenUserError(
            f"defaults.virtualCluster: user {user.get_username()} is not allowed to submit to virtual cluster {name}."
        )
    raise NoVirtualClusterError(f"defaults.virtualCluster: virtual cluster {name} is not found.")


def _storages_for(user, asked):
    """[{name, mountPath}] the job mounts: the ones asked for, else the user's default storages."""
    grants = StorageGrant.objects.filter(group_id__in=group_ids_of(user))
    if not asked:
        defaults = dict(grants.filter(is_default=True).order_by().values_list("storage__name", "storage__mount_path"))
        return [{"name": name, "mountPath": mount_path} for name, mount_path in sorted(defaults.items())]
    # Granted to one of the user's groups, or shared with one (`StorageConfig.granted_to`).
    granted = set(
        StorageConfig.objects.granted_to(user).filter(name__in=[s["name"] for s in asked]).values_list("name", flat=True)
    )
    errors = [
        f"extras.storages[{i}].name: no storage named '{s['name']}' is granted to you"
        for i, s in enumerate(asked) if s["name"] not in granted
    ]
    if errors:
        raise InvalidProtocolError(errors)
    return [{"name": s["name"], "mountPath": s["mountPath"]} for s in asked]


def check_job(user, body):
    """Everything `submit_job` checks, with nothing written: the protocol, the VC (one the user
    may use), its quota and SKUs, the storages. Returns (parsed, vc, plans, storages); raises
    what `submit_job` raises. The portal's "Check" asks this."""
    try:
        parsed = parse_job(body)
    except ProtocolTooLargeError as exc:
        raise PayloadTooLargeError(exc.errors[0]) from None
    except ProtocolError as exc:
        raise InvalidProtocolError(exc.errors) from None
    vc = _virtual_cluster_for(user, parsed.virtual_cluster)
    # Opportunistic jobs run on idle cells anywhere in the cluster, outside the quota.
    opportunistic = parsed.priority < 0
    skus, capacity = submit_limits(vc, opportunistic)
    try:
        holder = f"cluster '{vc.cluster.name}'" if opportunistic else None
        plans = plan_leaf_cells(parsed.spec, vc.name, skus, capacity, parsed.gang_allocation, holder)
    except ProtocolError as exc:
        raise InvalidProtocolError(exc.errors) from None
    storages = _storages_for(user, parsed.storages)
    return parsed, vc, plans, storages


def submit_job(user, body):
    """Check a job document against the protocol and the VC, and queue the job.

    Returns (job, warnings). The job waits in `AttemptCreationPending` with no attempt
    until the scheduler places it.
    """
    parsed, vc, plans, storages = check_job(user, body)
    task_roles = parsed.task_roles()
    leaf_cells = {}
    for plan in plans.values():
        leaf_cells[plan.sku.name] = leaf_cells.get(plan.sku.name, 0) + plan.cells
    launch = {
        "taskRoles": {
            role: {
                "image": _image_of(parsed.spec, spec["dockerImage"]),
                "commands": parsed.commands[role],
                "sku": plans[role].sku.name,
                "leafCellsPerInstance": plans[role].cells_per_instance,
            }
            for role, spec in task_roles.items()
        },
        "storages": storages,
    }
    job = Job(
        owner=user,
        tenant_id=vc.tenant_id,
        virtual_cluster=vc,
        name=parsed.name,
        protocol_text=parsed.protocol_text,
        spec=parsed.spec,
        launch=launch,
        warnings=parsed.warnings,
        priority_class=parsed.priority_class,
        priority=parsed.priority,
        gang_allocation=parsed.gang_allocation,
        job_retry_count=parsed.job_retry_count,
        total_gpu=sum(s["resourcePerInstance"]["gpu"] * s["instances"] for s in task_roles.values()),
        total_tasks=sum(s["instances"] for s in task_roles.values()),
        total_task_roles=len(task_roles),
        cell_cpu=sum(p.sku.cpu * p.cells for p in plans.values()),
        cell_memory_mb=sum(p.sku.memory_mb * p.cells for p in plans.values()),
        cell_gpu=sum(p.sku.gpu * p.cells for p in plans.values()),
        leaf_cells=leaf_cells,
    )
    try:
        with transaction.atomic():
            job.save()
            if parsed.secrets or parsed.image_auth:
                JobSecret.objects.create(job=job, values=parsed.secrets, image_auth=parsed.image_auth)
            record(user, "job.submit", job, changes={
                "virtualCluster": vc.name, "priorityClass": parsed.priority_class, "leafCells": leaf_cells,
            })
    except IntegrityError:
        if Job.objects.filter(owner=user, name=parsed.name).exists():
            raise ConflictJobError(f"name: job {parsed.name} already exists for user {user.get_username()}.") from None
        raise
    transaction.on_commit(_kick_scheduler)
    return job, parsed.warnings


def _kick_scheduler():
    from .tasks import kick

    kick()


def _image_of(spec, prerequisite_name):
    for item in spec.get("prerequisites") or []:
        if item["type"] == "dockerimage" and item["name"] == prerequisite_name:
            return item["uri"]
    return None


@transaction.atomic
def set_execution_type(user, job, value, *, stop_exit_code=None, stop_reason=""):
    """START or STOP a job (OpenPAI's executionType). Returns the job as it now is.

    A stop pai decides itself (`user` None, the idle-GPU rule) gives the exit code the job
    ends with and why, in place of a user's stop (-210, "stopped by the user")."""
    if value not in ExecutionType.values:
        raise InvalidParametersError("value: must be START or STOP")
    job = Job.objects.select_for_update().get(pk=job.pk)
    if value == job.execution_type or job.state in COMPLETED_STATES:
        return job
    if value == ExecutionType.START:
        raise InvalidParametersError(
            f"value: job {job.name} was stopped; pai does not restart a stopped job, submit it again instead."
        )
    before = {"state": job.state, "subState": job.sub_state, "executionType": job.execution_type}
    job.execution_type = ExecutionType.STOP
    job.stop_exit_code, job.stop_reason = stop_exit_code, (stop_reason or "")[:500]
    code = STOP_REQUESTED_EXIT_CODE if stop_exit_code is None else stop_exit_code
    has_pods = TaskAttempt.objects.filter(task__job_attempt__job=job).exclude(pod_name="").exists()
    if has_pods:
        # The worker deletes the pods and completes the stop.
        job.state, job.sub_state = JobState.STOPPING, JobSubState.ATTEMPT_DELETION_PENDING
    else:
        now = timezone.now()
        job.state, job.sub_state = JobState.STOPPED, JobSubState.COMPLETED
        job.app_exit_code = code
        job.completed_at = now
        job.placement = None
        job.reservation = None  # a preemption it waited for is abandoned
        job.queue_position = None
        job.wait_reason = ""
        job.attempts.filter(completed_at__isnull=True).update(
            state=JobState.STOPPED, sub_state=JobSubState.COMPLETED, completed_at=now,
            exit_code=code, exit_trigger_message=job.stop_reason,
        )
        last = job.attempts.order_by("-index").values_list("index", flat=True).first()
        notifications.record_transitions([(job.pk, -1 if last is None else last, "stopped")])
    job.save()
    transaction.on_commit(_kick_scheduler)
    changes = {
        "before": before, "after": {"state": job.state, "subState": job.sub_state, "executionType": job.execution_type},
    }
    if stop_exit_code is not None:
        changes.update(exitCode=stop_exit_code, reason=job.stop_reason)
    record(user, "job.stop", job, changes=changes)
    return job


def _clean_tag(value):
    if not isinstance(value, str) or not value.strip():
        raise InvalidParametersError("value: must be a non-empty string")
    if len(value) > MAX_TAG_LENGTH:
        raise InvalidParametersError(f"value: must be at most {MAX_TAG_LENGTH} characters")
    if not storable_text(value):
        raise InvalidParametersError("value: must be text without NUL characters or lone surrogates")
    return value


@transaction.atomic
def add_tag(user, job, value):
    value = _clean_tag(value)
    _, created = JobTag.objects.get_or_create(job=job, name=value)
    if created:
        record(user, "job.tag.add", job, changes={"tag": value})


@transaction.atomic
def remove_tag(user, job, value):
    value = _clean_tag(value)
    deleted, _ = JobTag.objects.filter(job=job, name=value).delete()
    if deleted:
        record(user, "job.tag.remove", job, changes={"tag": value})
