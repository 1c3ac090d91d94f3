"""One cluster's control loop: observe pods, advance job lifecycles, schedule, launch.

Every step writes its intent to the database before it acts on the cluster, and every
step is idempotent, so a worker killed between any two statements is repaired by the
next pass (of the same or another worker):

- placing a job persists its placement, attempt, tasks and task attempts (with their
  deterministic pod names) in one transaction, then creates the pods; creating a pod
  that exists returns it, so a repeated pass never starts a second pod;
- ending an attempt records its exit code and `AttemptDeletionPending` first, then
  deletes the remaining pods (with their recorded UIDs), then completes;
- the engine's state is rebuilt from the persisted placements whenever a worker becomes
  the leader or the configuration changes.
"""

import hashlib
import json
import logging
import os
import signal
import time
from dataclasses import asdict
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from apps.clusters.models import CellType, Node
from apps.clusters.services import cluster_spec
from apps.virtualclusters.models import VirtualCluster
from apps.virtualclusters.services import vc_spec
from scheduler import Allocation, Engine, GangRequest, PodPlacement, PodRequest
from scheduler import exitcodes, lifecycle
from scheduler.backends import (
    LABEL_JOB,
    CursorExpiredError,
    PermanentCreationError,
    PodConflictError,
    TransientCreationError,
)
from scheduler.podenv import PortAllocator

from ..choices import JobState, JobSubState
from ..models import Job, JobAttempt, JobEvent, Task, TaskAttempt
from . import launch
from .backends import backend_for, local_state_dir

log = logging.getLogger(__name__)

WAITING_SUBSTATES = (
    JobSubState.ATTEMPT_CREATION_REQUESTED,
    JobSubState.ATTEMPT_PREPARING,
)
DELETION_SUBSTATES = (
    JobSubState.ATTEMPT_DELETION_PENDING,
    JobSubState.ATTEMPT_DELETION_REQUESTED,
    JobSubState.ATTEMPT_DELETING,
)
# Codes an attempt ends with when pai itself ends it; the pods it deletes get the same
# code, except that a completion policy's own end gives the remaining tasks -220.
CODES_SHARED_WITH_TASKS = frozenset(
    {exitcodes.STOP_REQUESTED, exitcodes.POD_PREEMPTED, exitcodes.POD_NODE_LOST, -1004}
)
# A pod that keeps failing to be created with transient errors fails its task after this.
CREATION_ATTEMPTS = 5


def failpoint(name):
    """Crash here when the crash tests ask for it (PAI_FAILPOINT=name): the worker dies as by SIGKILL."""
    if os.environ.get("PAI_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def placement_json(allocation):
    return json.loads(json.dumps(asdict(allocation)))


def allocation_from_json(data):
    pods = tuple(
        PodPlacement(**{**pod, "devices": tuple(pod["devices"]), "cell_chain": tuple(pod["cell_chain"])})
        for pod in data["pods"]
    )
    return Allocation(**{**data, "pods": pods})


def engine_job_id(job_pk):
    return str(job_pk)


def gang_request(job):
    extras = (job.spec.get("extras") or {}).get("hivedScheduler") or {}
    role_extras = extras.get("taskRoles") or {}
    pods = []
    for name, spec in launch.task_roles(job):
        role = job.launch["taskRoles"][name]
        pinned = (role_extras.get(name) or {}).get("pinnedCellId")
        for index in range(int(spec.get("instances", 1))):
            pods.append(
                PodRequest(
                    task_role=name,
                    index=index,
                    sku=role["sku"],
                    leaf_cells=int(role["leafCellsPerInstance"]),
                    pinned_cell=pinned,
                )
            )
    return GangRequest(
        job_id=engine_job_id(job.pk),
        vc=job.virtual_cluster.name,
        user=job.owner.username,
        priority=job.priority,
        pods=tuple(pods),
        submitted_at=job.submitted_at.timestamp(),
        lazy_preemption=bool(extras.get("lazyPreemptionEnable", False)),
    )


def _dt(value):
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


class Controller:
    """The leader's view of one cluster: its engine, its backend and the pod feed's cursor."""

    def __init__(self, cluster, backend=None):
        self.cluster = cluster
        self.backend = backend or backend_for(cluster)
        self.engine = None
        self.config_digest = None
        self.cursor = None
        self.ports = PortAllocator()

    # -- configuration ---------------------------------------------------------------

    def _configuration(self):
        spec = cluster_spec(self.cluster)
        vcs = [vc_spec(vc) for vc in VirtualCluster.objects.filter(cluster=self.cluster).order_by("name")]
        digest = hashlib.sha256(repr((spec, vcs)).encode()).hexdigest()
        return spec, vcs, digest

    def refresh_configuration(self):
        """(Re)build the engine when it is new or the configuration changed; restore placements."""
        spec, vcs, digest = self._configuration()
        if self.engine is not None and digest == self.config_digest:
            return False
        engine = Engine(spec, vcs)
        jobs = list(self._jobs().filter(placement__isnull=False))
        report = engine.restore([allocation_from_json(job.placement) for job in jobs])
        self.engine, self.config_digest = engine, digest
        persisted = {a.job_id: a for a in engine.allocations()}
        for job in jobs:
            allocation = persisted.get(engine_job_id(job.pk))
            if allocation is not None and placement_json(allocation) != job.placement:
                Job.objects.filter(pk=job.pk).update(placement=placement_json(allocation))
        for issue in report.dropped:
            # The placement is on cells that no longer exist: its pods cannot keep running.
            self._end_attempt_of(int(issue.job_id), exitcodes.POD_NODE_LOST, f"placement dropped: {issue.reason}")
        self.ports = PortAllocator()
        for ta in TaskAttempt.objects.filter(
            task__job_attempt__job__virtual_cluster__cluster=self.cluster, completed_at__isnull=True
        ).exclude(ports={}):
            ip = self._node_ips().get(ta.node_name, "127.0.0.1")
            for values in ta.ports.values():
                self.ports.reserve(ip, values)
        log.info("cluster %s: engine built, %d placements restored", self.cluster.name, report.restored)
        return True

    def _jobs(self):
        return Job.objects.filter(virtual_cluster__cluster=self.cluster)

    def _node_ips(self):
        return {n.name: n.ip or "127.0.0.1" for n in Node.objects.filter(cluster=self.cluster)}

    def sync_node_health(self):
        for node in Node.objects.filter(cluster=self.cluster).only("name", "ready", "schedulable"):
            self.engine.set_node_health(node.name, node.healthy)

    # -- the cycle -------------------------------------------------------------------

    def run_cycle(self, now=None):
        now = time.time() if now is None else now
        self.refresh_configuration()
        self.sync_node_health()
        self.observe()
        self.advance_jobs()
        self.schedule(now)
        self.create_missing_pods()
        self.advance_jobs()

    # -- observing pods --------------------------------------------------------------

    def observe(self):
        if self.cursor is None:
            cursor = self.backend.cursor()
            observations = self.backend.poll(None)
            self._apply_relist(observations)
            self.cursor = cursor
        else:
            try:
                observations = self.backend.poll(self.cursor)
            except CursorExpiredError:
                self.cursor = None
                return self.observe()
            if observations:
                self.cursor = observations[-1].resource_version
        for observation in observations:
            self.apply_observation(observation)

    def _apply_relist(self, live):
        """After a relist: pods we recorded as created that are not live any more vanished."""
        names = {o.name for o in live}
        missing = (
            TaskAttempt.objects.filter(task__job_attempt__job__virtual_cluster__cluster=self.cluster)
            .filter(completed_at__isnull=True)
            .exclude(pod_uid="")
            .exclude(pod_name__in=names)
        )
        for ta in missing.select_related("task__job_attempt"):
            self._complete_task_attempt(ta, exitcodes.POD_EXTERNAL_DELETED, "the pod vanished")
        # Pods that carry pai's labels but belong to no live task attempt are orphans.
        known = set(
            TaskAttempt.objects.filter(pod_name__in=names, completed_at__isnull=True).values_list("pod_name", flat=True)
        )
        for observation in live:
            if observation.name not in known and LABEL_JOB in observation.labels:
                log.warning("deleting orphaned pod %s", observation.name)
                self._delete_pod(observation.name, observation.uid)

    def apply_observation(self, observation):
        ta = (
            TaskAttempt.objects.filter(pod_name=observation.name)
            .select_related("task__job_attempt__job")
            .first()
        )
        if ta is None or ta.completed_at is not None:
            return
        if ta.pod_uid and observation.uid and ta.pod_uid != observation.uid:
            return  # another incarnation of the name: not ours
        updates = {}
        if not ta.pod_uid and observation.uid:
            updates["pod_uid"] = observation.uid
        if observation.node and observation.node != ta.node_name:
            updates["node_name"] = observation.node
        if observation.ip and not ta.ip:
            updates["ip"] = observation.ip
        if observation.phase == "Running" and ta.state != JobState.RUNNING:
            updates["state"] = JobState.RUNNING
        if not ta.started_at and (observation.started_at or observation.phase == "Running"):
            updates["started_at"] = _dt(observation.started_at) or timezone.now()
        if updates:
            TaskAttempt.objects.filter(pk=ta.pk).update(**updates)
            for key, value in updates.items():
                setattr(ta, key, value)
        self._store_events(ta)
        if observation.terminal or observation.deleted:
            attempt = ta.task.job_attempt
            if attempt.sub_state in DELETION_SUBSTATES and attempt.exit_code is not None:
                code = self._code_for_deleted_tasks(attempt.exit_code)
                if observation.terminal and observation.exit_code == 0 and not observation.deletion_requested:
                    code = exitcodes.SUCCEEDED
                self._complete_task_attempt(ta, code, observation.message, observation)
                return
            log_tail = ""
            if observation.terminal and observation.exit_code not in (0, None):
                log_tail = self._log_tail(ta.pod_name)
            exit_ = lifecycle.task_exit(observation, log_tail)
            diagnostics = "; ".join(p for p in (observation.reason, observation.container_reason, observation.message) if p)
            self._complete_task_attempt(ta, exit_.code, diagnostics, observation, row=exit_.row)

    def _log_tail(self, name):
        try:
            return self.backend.read_log(name, tail_lines=exitcodes.LOG_TAIL_LINES)
        except Exception:  # a log that cannot be read only loses the pattern match
            log.exception("cannot read the log of %s", name)
            return ""

    def _store_events(self, ta):
        try:
            events = self.backend.read_events(ta.pod_name)
        except Exception:
            log.exception("cannot read the events of %s", ta.pod_name)
            return
        job = ta.task.job_attempt.job
        seen = set(
            JobEvent.objects.filter(task_attempt=ta).values_list("reason", "first_seen")
        )
        new = []
        for event in events:
            at = _dt(event.at)
            if (event.reason, at) in seen:
                continue
            new.append(
                JobEvent(
                    job=job,
                    task_attempt=ta,
                    pod_uid=ta.pod_uid,
                    task_role=ta.task.task_role,
                    task_index=ta.task.index,
                    type=event.type,
                    reason=event.reason,
                    message=event.message,
                    first_seen=at,
                    last_seen=at,
                    count=event.count,
                    source_component="pai-worker",
                    source_host=ta.node_name,
                )
            )
        JobEvent.objects.bulk_create(new)

    @staticmethod
    def _code_for_deleted_tasks(attempt_code):
        return attempt_code if attempt_code in CODES_SHARED_WITH_TASKS else exitcodes.ATTEMPT_COMPLETION

    def _complete_task_attempt(self, ta, code, diagnostics="", observation=None, row=None):
        row = row or exitcodes.row(code)
        state = JobState.SUCCEEDED if row.type == "succeeded" else JobState.FAILED
        finished = _dt(observation.finished_at) if observation is not None else None
        with transaction.atomic():
            updated = TaskAttempt.objects.filter(pk=ta.pk, completed_at__isnull=True).update(
                state=state,
                exit_code=code,
                exit_spec_code=row.code,
                diagnostics=diagnostics[:4000],
                completed_at=finished or timezone.now(),
            )
            if updated:
                Task.objects.filter(pk=ta.task_id).update(state=state)
        if updated:
            ip = self._node_ips().get(ta.node_name, "127.0.0.1")
            for values in (ta.ports or {}).values():
                self.ports.release(ip, values)

    # -- job lifecycles --------------------------------------------------------------

    def advance_jobs(self):
        self._finish_stops_between_attempts()
        attempts = (
            JobAttempt.objects.filter(job__virtual_cluster__cluster=self.cluster, completed_at__isnull=True)
            .select_related("job__owner", "job__virtual_cluster", "job__tenant")
            .order_by("job_id", "index")
        )
        for attempt in attempts:
            self.advance_attempt(attempt)

    def _finish_stops_between_attempts(self):
        """A stop that came while the job waited to be retried has no pods to delete."""
        now = timezone.now()
        stopped = self._jobs().filter(execution_type="STOP", state=JobState.STOPPING, placement__isnull=True)
        for job in stopped.exclude(attempts__completed_at__isnull=True):
            Job.objects.filter(pk=job.pk, placement__isnull=True).update(
                state=JobState.STOPPED,
                sub_state=JobSubState.COMPLETED,
                app_exit_code=exitcodes.STOP_REQUESTED,
                completed_at=now,
                wait_reason="",
                queue_position=None,
            )

    def advance_attempt(self, attempt):
        job = attempt.job
        task_attempts = list(
            TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task").order_by("task__task_role", "task__index", "index")
        )
        if job.execution_type == "STOP" and attempt.sub_state not in DELETION_SUBSTATES:
            self._begin_deletion(attempt, exitcodes.STOP_REQUESTED, "stopped by the user")
        if (
            attempt.sub_state in WAITING_SUBSTATES
            and task_attempts
            and all(ta.pod_uid and ta.started_at for ta in task_attempts)
        ):
            self._set_sub_state(attempt, JobSubState.ATTEMPT_RUNNING, launched=True)
        if attempt.sub_state in WAITING_SUBSTATES + (JobSubState.ATTEMPT_RUNNING,):
            outcome = self._evaluate(job, task_attempts)
            if outcome is not None:
                self._begin_deletion(attempt, outcome.exit_code, outcome.trigger, outcome.exit_row, outcome.task)
        if attempt.sub_state in DELETION_SUBSTATES:
            self._delete_remaining(attempt, task_attempts)

    def _evaluate(self, job, task_attempts):
        """Replay the completed tasks in completion order through the completion policy."""
        completed = sorted((ta for ta in task_attempts if ta.completed_at), key=lambda ta: (ta.completed_at, ta.pk))
        if not completed:
            return None
        progress = {}
        for name, spec in launch.task_roles(job):
            completion = spec.get("completion") or {}
            instances = int(spec.get("instances", 1))
            progress[name] = lifecycle.TaskRoleProgress(
                name=name,
                instances=instances,
                policy=lifecycle.completion_policy(
                    instances, completion.get("minFailedInstances"), completion.get("minSucceededInstances")
                ),
            )
        for ta in completed:
            row = exitcodes.row(ta.exit_spec_code if ta.exit_spec_code is not None else ta.exit_code)
            task = lifecycle.CompletedTask(ta.task.task_role, ta.task.index, ta.exit_code, row)
            role = progress[ta.task.task_role]
            if task.succeeded:
                role = lifecycle.TaskRoleProgress(role.name, role.instances, role.policy, role.succeeded + 1, role.failed)
            else:
                role = lifecycle.TaskRoleProgress(role.name, role.instances, role.policy, role.succeeded, role.failed + 1)
            progress[ta.task.task_role] = role
            outcome = lifecycle.evaluate_completion(list(progress.values()), task)
            if outcome.status != "running":
                return outcome
        return None

    def _set_sub_state(self, attempt, sub_state, *, launched=False):
        now = timezone.now()
        job = attempt.job
        with transaction.atomic():
            attempt.sub_state = sub_state
            attempt.state = lifecycle.user_state(sub_state, attempt.exit_code).value
            fields = {"sub_state": attempt.sub_state, "state": attempt.state}
            job_fields = {"sub_state": sub_state, "state": attempt.state}
            if launched:
                fields["launched_at"] = now
                job_fields["launched_at"] = now
                job_fields["wait_reason"] = ""
            JobAttempt.objects.filter(pk=attempt.pk).update(**fields)
            Job.objects.filter(pk=job.pk).update(**job_fields)

    def _begin_deletion(self, attempt, code, diagnostics, row=None, task=None):
        """Write why the attempt ends before deleting anything (the intent survives a crash)."""
        row = row or exitcodes.row(code)
        with transaction.atomic():
            attempt.exit_code = code
            attempt.exit_spec_code = row.code
            attempt.exit_diagnostics = self._diagnostics(attempt, row, diagnostics, task)
            if task is not None:
                attempt.trigger_task_role, attempt.trigger_task_index = task.task_role, task.index
            attempt.sub_state = JobSubState.ATTEMPT_DELETION_PENDING
            attempt.state = lifecycle.user_state(attempt.sub_state, code).value
            attempt.save(update_fields=[
                "exit_code", "exit_spec_code", "exit_diagnostics", "trigger_task_role", "trigger_task_index",
                "sub_state", "state",
            ])
            Job.objects.filter(pk=attempt.job_id).update(sub_state=attempt.sub_state, state=attempt.state)
        failpoint("after-deletion-pending")

    def _diagnostics(self, attempt, row, message, task):
        lines = [f"{row.code} {row.phrase}: {row.reason}", f"What to do: {row.solution}"]
        if message:
            lines.append(f"Why: {message}")
        if task is not None:
            lines.append(f"Triggered by task {task.task_role}[{task.index}] (exit code {task.exit_code}).")
            ta = (
                TaskAttempt.objects.filter(task__job_attempt=attempt, task__task_role=task.task_role, task__index=task.index)
                .order_by("-index")
                .first()
            )
            if ta is not None and row.type != "succeeded":
                tail = self._log_tail(ta.pod_name)
                if tail:
                    lines.append("Last lines of its log:\n" + "\n".join(tail.splitlines()[-20:]))
        return "\n".join(lines)

    def _delete_pod(self, name, uid):
        try:
            return self.backend.delete_pod(name, uid=uid or None)
        except PodConflictError:
            return False

    def _delete_remaining(self, attempt, task_attempts):
        remaining = [ta for ta in task_attempts if ta.completed_at is None]
        for ta in remaining:
            existed = self._delete_pod(ta.pod_name, ta.pod_uid)
            if not existed and not ta.pod_uid:
                # Never created (or never seen): nothing to wait for.
                self._complete_task_attempt(ta, self._code_for_deleted_tasks(attempt.exit_code), "not created")
        if remaining and attempt.sub_state == JobSubState.ATTEMPT_DELETION_PENDING:
            self._set_sub_state(attempt, JobSubState.ATTEMPT_DELETION_REQUESTED)
            failpoint("after-deletion-requested")
        still_running = TaskAttempt.objects.filter(task__job_attempt=attempt, completed_at__isnull=True).exists()
        if not still_running:
            self.finish_attempt(attempt)

    def finish_attempt(self, attempt):
        """The attempt's pods are gone: retry (back to the queue) or complete the job."""
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=attempt.job_id)
            attempt = JobAttempt.objects.select_for_update().get(pk=attempt.pk)
            if attempt.completed_at is not None:
                return
            row = exitcodes.row(attempt.exit_spec_code if attempt.exit_spec_code is not None else attempt.exit_code)
            counted = sum(
                1
                for code in JobAttempt.objects.filter(job=job, completed_at__isnull=False).values_list("exit_spec_code", flat=True)
                if code is not None and exitcodes.row(code).type == "unknown"
            )
            state = lifecycle.RetryState(
                retries=job.retries, counted=counted, user=job.retries_user,
                platform=job.retries_platform, resource=job.retries_resource,
            )
            decision = lifecycle.decide_job_retry(
                attempt.exit_code, row, job.job_retry_count, state, stop_requested=job.execution_type == "STOP"
            )
            now = timezone.now()
            attempt.completed_at = now
            attempt.sub_state = JobSubState.COMPLETED
            attempt.state = lifecycle.user_state(JobSubState.COMPLETED, attempt.exit_code).value
            attempt.save(update_fields=["completed_at", "sub_state", "state"])
            failpoint("during-completion")
            job.placement = None
            job.queue_position = None
            if decision.retry:
                job.retries = decision.state.retries
                job.retries_user = decision.state.user
                job.retries_platform = decision.state.platform
                job.retries_resource = decision.state.resource
                job.state, job.sub_state = JobState.WAITING, JobSubState.ATTEMPT_CREATION_PENDING
                job.wait_reason = f"Retrying after {row.phrase} ({attempt.exit_code}); waiting for cells."
            else:
                job.state = decision.final_state.value
                job.sub_state = JobSubState.COMPLETED
                job.app_exit_code = decision.exit_code
                job.completed_at = now
                job.wait_reason = ""
            job.save()
        self.engine.release(engine_job_id(job.pk))

    def _end_attempt_of(self, job_pk, code, message):
        attempt = JobAttempt.objects.filter(job_id=job_pk, completed_at__isnull=True).select_related("job").first()
        if attempt is not None and attempt.sub_state not in DELETION_SUBSTATES:
            self._begin_deletion(attempt, code, message)

    # -- scheduling ------------------------------------------------------------------

    def schedule(self, now):
        queue = list(
            self._jobs()
            .filter(state=JobState.WAITING, placement__isnull=True, execution_type="START")
            .select_related("owner", "virtual_cluster")
            .order_by("-priority", "submitted_at", "pk")
        )
        jobs = {engine_job_id(job.pk): job for job in queue}
        gangs = [gang_request(job) for job in queue]
        result = self.engine.schedule(gangs, now)
        for preemption in result.preemptions:
            self._apply_preemption(preemption)
        for allocation in result.placements:
            self._persist_placement(jobs[allocation.job_id], allocation)
        for rejection in result.rejected:
            job = jobs.get(rejection.job_id)
            if job is not None:
                self._reject(job, f"{rejection.field}: {rejection.message}")
        for job_id in result.expired:
            self._end_attempt_of(int(job_id), -1004, "the job ran past its maximum runtime")
        self._record_waits(jobs, result.waiting)

    def _apply_preemption(self, preemption):
        job_pk = int(preemption.job_id)
        if preemption.lazy:
            allocation = next((a for a in self.engine.allocations() if a.job_id == preemption.job_id), None)
            if allocation is not None:
                Job.objects.filter(pk=job_pk).update(placement=placement_json(allocation))
            return
        self._end_attempt_of(job_pk, exitcodes.POD_PREEMPTED, f"preempted by job {preemption.by_job}")

    def _persist_placement(self, job, allocation):
        node_ips = self._node_ips()
        placement = placement_json(allocation)
        with transaction.atomic():
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if locked.placement is not None or locked.state != JobState.WAITING or locked.execution_type != "START":
                self.engine.release(allocation.job_id)
                return
            last = locked.attempts.order_by("-index").values_list("index", flat=True).first()
            index = 0 if last is None else last + 1
            ports = launch.allocate_ports(job, index, placement, node_ips, self.ports)
            attempt = JobAttempt.objects.create(
                job=locked, index=index, state=JobState.WAITING, sub_state=JobSubState.ATTEMPT_CREATION_REQUESTED
            )
            key = launch.job_key(job)
            state_dir = local_state_dir(self.cluster)
            for pod in placement["pods"]:
                task = Task.objects.create(job_attempt=attempt, task_role=pod["task_role"], index=pod["index"])
                name = launch.pod_name(key, pod["task_role"], pod["index"], index, 0)
                TaskAttempt.objects.create(
                    task=task,
                    index=0,
                    pod_name=name,
                    node_name=pod["node"],
                    device_indices=list(pod["devices"]),
                    ip=node_ips.get(pod["node"]),
                    ports=ports[(pod["task_role"], pod["index"])],
                    log_path=str(state_dir / "pods" / name / "all.log"),
                )
            now = timezone.now()
            Job.objects.filter(pk=job.pk).update(
                placement=placement,
                sub_state=JobSubState.ATTEMPT_CREATION_REQUESTED,
                state=JobState.WAITING,
                created_at=now,
                wait_reason="",
                queue_position=None,
            )
        failpoint("after-placement-persisted")

    def _reject(self, job, message):
        row = exitcodes.row(exitcodes.POD_CREATION_PERMANENT_ERROR)
        Job.objects.filter(pk=job.pk, placement__isnull=True, state=JobState.WAITING).update(
            state=JobState.FAILED,
            sub_state=JobSubState.COMPLETED,
            app_exit_code=row.code,
            completed_at=timezone.now(),
            wait_reason=f"This job can never run here: {message}",
            queue_position=None,
        )

    def _record_waits(self, jobs, waiting):
        for info in waiting:
            job = jobs.get(info.job_id)
            if job is None:
                continue
            if job.wait_reason != info.reason or job.queue_position != info.position:
                Job.objects.filter(pk=job.pk, placement__isnull=True).update(
                    wait_reason=info.reason, queue_position=info.position
                )

    # -- launching pods --------------------------------------------------------------

    def create_missing_pods(self):
        attempts = (
            JobAttempt.objects.filter(
                job__virtual_cluster__cluster=self.cluster,
                completed_at__isnull=True,
                sub_state=JobSubState.ATTEMPT_CREATION_REQUESTED,
            )
            .select_related("job__owner", "job__virtual_cluster", "job__tenant")
            .order_by("job_id")
        )
        node_ips = self._node_ips()
        gpus_per_leaf = dict(CellType.objects.filter(cluster=self.cluster, child__isnull=True).values_list("name", "gpu"))
        for attempt in attempts:
            job = attempt.job
            pairs = [
                (ta, ta.task)
                for ta in TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task").order_by(
                    "task__task_role", "task__index"
                )
            ]
            specs = launch.pod_specs(job, attempt.index, pairs, job.placement, node_ips, gpus_per_leaf)
            created_all = True
            for (ta, _task), spec in zip(pairs, specs):
                if ta.pod_uid or ta.completed_at:
                    continue
                try:
                    observation = self.backend.create_pod(spec)
                except TransientCreationError as exc:
                    created_all = False
                    failures = ta.diagnostics.count("creation failed") + 1
                    if failures >= CREATION_ATTEMPTS:
                        self._complete_task_attempt(ta, exitcodes.POD_CREATION_TRANSIENT_ERROR, str(exc))
                    else:
                        TaskAttempt.objects.filter(pk=ta.pk).update(
                            diagnostics=f"{ta.diagnostics}\ncreation failed: {exc}".strip()
                        )
                    continue
                except PermanentCreationError as exc:
                    self._complete_task_attempt(ta, exitcodes.POD_CREATION_PERMANENT_ERROR, str(exc))
                    continue
                TaskAttempt.objects.filter(pk=ta.pk).update(pod_uid=observation.uid)
                ta.pod_uid = observation.uid
                failpoint("after-pod-created")
            if created_all:
                self._set_sub_state(attempt, JobSubState.ATTEMPT_PREPARING)
