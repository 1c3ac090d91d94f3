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

A cycle does bounded work: at most ``PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE`` jobs placed
(the engine's first decisions; the others are decided again next cycle) and
``PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE`` pods created (checked before each attempt,
so a gang's pods are not split between cycles); the rest waits for the next cycle.
"""

import hashlib
import logging
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import fields
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import Max, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.clusters.models import Node
from apps.clusters.services import cluster_spec
from apps.monitoring import figures
from apps.usage import budgets as usage_budgets
from apps.usage import ledger as usage_ledger
from apps.virtualclusters.models import VirtualCluster
from apps.virtualclusters.services import vc_spec
from scheduler import Allocation, Engine, GangRequest, PodPlacement, PodRequest
from scheduler import exitcodes, lifecycle
from scheduler.backends import (
    LABEL_JOB,
    ClusterUnavailableError,
    CursorExpiredError,
    PermanentCreationError,
    PodConflictError,
    PodNotFoundError,
    TransientCreationError,
)
from scheduler.podenv import PortAllocator, PortsExhaustedError

from ..choices import JobState, JobSubState
from .. import notifications
from ..models import Job, JobAttempt, JobEvent, Task, TaskAttempt, TaskLog
from . import launch
from .bulk import bulk_insert, bulk_set
from .backends import backend_for, local_state_dir
from .lease import LeaseLost

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
    {exitcodes.STOP_REQUESTED, exitcodes.STOPPED_FOR_LOW_GPU_USE, exitcodes.POD_PREEMPTED, exitcodes.POD_NODE_LOST,
     -1004}
)
# A pod that keeps failing to be created with transient errors fails its task after this.
CREATION_ATTEMPTS = 5
# Container reasons of a pod whose image cannot be pulled: the task fails without waiting.
IMAGE_PULL_FAILURES = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
# Failures that are not one job's: they end the cycle (the loop rebuilds it next tick, or pauses
# the cluster while its API is down).
NOT_ONE_JOBS_FAILURE = (DatabaseError, LeaseLost, ClusterUnavailableError)
# How much of an ended pod's log the worker keeps when the backend forgets it with the pod:
# the last this many lines, at most PAI_TASK_LOG_KEEP_BYTES of them.
KEPT_LOG_LINES = 1000
# What a job placed beyond a cycle's cap waits for.
DEFERRED_REASON = "Its cells are free: it is placed within the next cycles (pai places a bounded number of jobs per cycle)."
# Placements persisted per transaction (a few statements each, whatever the gangs' sizes).
PERSIST_BATCH = 200
# Every this many cycles the lifecycle pass looks at every open attempt, not only the
# ones whose pods changed, and the configuration is read again.
FULL_PASS_EVERY = 20


_failpoint_passes = {}


def failpoint(name):
    """Crash here when the crash tests ask for it (PAI_FAILPOINT=name): the worker dies as by
    SIGKILL. With PAI_FAILPOINT_ACTION=stop it stops instead (SIGSTOP, as a process paused
    by a long GC or a VM migration) until it is continued; PAI_FAILPOINT_AFTER=N: at the
    N-th pass (the first by default)."""
    if os.environ.get("PAI_FAILPOINT") != name:
        return
    passes = _failpoint_passes[name] = _failpoint_passes.get(name, 0) + 1
    if passes != int(os.environ.get("PAI_FAILPOINT_AFTER", "1")):
        return
    if os.environ.get("PAI_FAILPOINT_ACTION") == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        os.kill(os.getpid(), signal.SIGKILL)


def _still_waiting(observation):
    """A pod that waits to start and says nothing the worker acts on (no IP, no start,
    no end, no deletion, no container reason such as a failed image pull)."""
    return (
        observation.phase == "Pending" and not observation.ip and not observation.started_at
        and not observation.container_reason and not observation.reason
        and not observation.deletion_requested and not observation.deleted
    )


def placement_json(allocation):
    """The allocation as the JSON document a job keeps (`Job.placement`): its dataclasses as
    dicts, tuples as lists. Written out field by field: ``asdict`` deep-copies every value
    and a JSON round trip on top of it cost more than persisting the placement."""
    return _plain(allocation)


def _plain(value):
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    names = _FIELDS.get(type(value))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} in a placement is not JSON")


_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in (Allocation, PodPlacement)}


def allocation_from_json(data):
    pods = tuple(
        PodPlacement(**{**pod, "devices": tuple(pod["devices"]), "cell_chain": tuple(pod["cell_chain"])})
        for pod in data["pods"]
    )
    return Allocation(**{**data, "pods": pods, "victims": tuple(data.get("victims") or ())})


def engine_job_id(job_pk):
    return str(job_pk)


def gang_request(job):
    """The engine's request for a job; ValueError (or another error of the stored documents'
    shape) when they do not describe one — the engine takes well-formed requests only."""
    extras = (job.spec.get("extras") or {}).get("hivedScheduler") or {}
    role_extras = extras.get("taskRoles") or {}
    pods = []
    for name, spec in launch.task_roles(job):
        role = job.launch["taskRoles"][name]
        pinned = (role_extras.get(name) or {}).get("pinnedCellId")
        instances, leaf_cells = int(spec.get("instances", 1)), int(role["leafCellsPerInstance"])
        if not (isinstance(role["sku"], str) and (pinned is None or isinstance(pinned, str))):
            raise ValueError(f"taskRoles.{name}: the SKU and pinned cell must be names")
        if not (1 <= instances <= settings.PAI_JOB_MAX_TASKS and leaf_cells >= 1):
            raise ValueError(f"taskRoles.{name}: {instances} instances of {leaf_cells} leaf cells")
        for index in range(instances):
            pods.append(
                PodRequest(task_role=name, index=index, sku=role["sku"], leaf_cells=leaf_cells, pinned_cell=pinned)
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
    """The leader's view of one cluster: its engine, its backend and the pod feed's cursor.

    With a `fence` (the scheduler lease, :class:`lease.Fence`), every step of a cycle and
    every write to the cluster first checks that this process still holds the lease:
    a deposed leader stops with :class:`lease.LeaseLost` before it writes.
    """

    def __init__(self, cluster, backend=None, fence=None):
        self.cluster = cluster
        self.fence = fence
        self.backend = backend or backend_for(cluster, guard=fence)
        self.engine = None
        self.config_digest = None
        self._devices = None  # launch.DevicePlan, read with the configuration (refresh_configuration)
        self.cursor = None
        self.ports = PortAllocator()
        self._ips = None  # node name → IP, read once per cycle
        # Attempts whose pods changed since the last pass; the others are looked at only
        # in a full pass (every FULL_PASS_EVERY cycles, and after a rebuild).
        self._touched = set()
        self._retried = set()  # attempts with a retried task whose pod is still to create
        # Pods that exist, as the backend reported them: the last relist (terminating pods
        # included) plus what the feed added, less what it reported deleted. A preempted
        # job's cells are released only once none of its pods is here.
        self._live = set()
        self._cycles = 0
        # Requests to the cluster in flight at once (pod creations, log reads, deletions).
        self.concurrency = settings.PAI_KUBE_CONCURRENCY
        self._pool = None
        self._thread = threading.get_ident()
        self._prefetched = {}  # pod name → the end of its log, read ahead (apply_observations)
        self._configuration_fresh = False  # read in this cycle
        self._finished_pods = {}  # name → UID: ended pods (their end stored) still to delete
        # name → UID of pods whose task attempt this controller completed, until they are
        # gone: what the feed still says of them (the deletion) changes nothing, so it is
        # not looked up in the database.
        self._ended = {}
        # name → UID of pods this controller created (their UID stored) that were not seen
        # past Pending yet: an observation that they still wait tells nothing new either.
        self._waiting = {}
        # name → (task attempt id, {(reason, first seen)}): the events stored of live pods
        # (forgotten when the feed says the pod is gone, or a relist misses it).
        self._events_stored = {}
        # Pods this cycle may still create (PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE).
        self._creations_left = settings.PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE

    def close(self):
        """Release the backend's connections and threads (pods keep running)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.backend.close()

    def _in_parallel(self, call, items):
        """``call(item)`` for each item, at most PAI_KUBE_CONCURRENCY at once (the client's
        rate limit still applies); [(result, exception)] in the items' order. Each call's
        thread lets go of any database connection it opened."""

        def run(item):
            try:
                return call(item), None
            except Exception as exc:
                return None, exc
            finally:
                if threading.get_ident() != self._thread:
                    connections.close_all()

        if len(items) < 2 or self.concurrency < 2:
            return [run(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pai-kube-requests")
        return list(self._pool.map(run, items))

    def _chunks(self, items):
        items = list(items)
        step = max(1, self.concurrency)
        return [items[i:i + step] for i in range(0, len(items), step)]

    def _guard(self, write=True):
        if self.fence is not None:
            self.fence.check(write)

    # -- configuration ---------------------------------------------------------------

    def _configuration(self):
        spec = cluster_spec(self.cluster)
        vcs = [vc_spec(vc) for vc in VirtualCluster.objects.filter(cluster=self.cluster).order_by("name")]
        digest = hashlib.sha256(repr((spec, vcs)).encode()).hexdigest()
        return spec, vcs, digest

    def refresh_configuration(self):
        """(Re)build the engine when it is new or the configuration changed; restore placements.
        The pods' device plan (each SKU's devices and resource) is read again each time."""
        self._devices = launch.DevicePlan.for_cluster(self.cluster)
        spec, vcs, digest = self._configuration()
        if self.engine is not None and digest == self.config_digest:
            return False
        engine = Engine(spec, vcs)
        jobs = list(self._jobs().filter(placement__isnull=False))
        # Gangs waiting for the jobs they preempt to stop hold cells too.
        reserving = list(self._queue().exclude(reservation=None).only("pk", "reservation"))
        report = engine.restore(
            [allocation_from_json(job.placement) for job in jobs]
            + [allocation_from_json(job.reservation) for job in reserving]
        )
        self.engine, self.config_digest = engine, digest
        persisted = {a.job_id: a for a in engine.allocations()}
        for job in jobs:
            allocation = persisted.get(engine_job_id(job.pk))
            if allocation is not None and placement_json(allocation) != job.placement:
                Job.objects.filter(pk=job.pk).update(placement=placement_json(allocation))
        self._record_reservations(reserving)
        for issue in report.dropped:
            # The placement is on cells that no longer exist: its pods cannot keep running.
            self._end_attempt_of(int(issue.job_id), exitcodes.POD_NODE_LOST, f"placement dropped: {issue.reason}")
        for issue in report.partial:
            # Some of the gang's nodes are gone: the attempt ends (and is retried); the engine
            # keeps the surviving pods' devices until they are deleted.
            self._end_attempt_of(int(issue.job_id), exitcodes.POD_NODE_LOST, f"part of the placement lost: {issue.reason}")
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

    def _queue(self):
        return self._jobs().filter(state=JobState.WAITING, placement__isnull=True, execution_type="START")

    def _node_ips(self):
        if self._ips is None:
            self._ips = {n.name: n.ip or "127.0.0.1" for n in Node.objects.filter(cluster=self.cluster)}
        return self._ips

    def sync_node_health(self):
        """Node health, and the devices other pods hold, from the Node rows to the engine. A
        Node row no physical cell describes (a machine registered before its cells) is not
        the engine's: it is passed over, and fails no cycle."""
        for node in Node.objects.filter(cluster=self.cluster).only("name", "ready", "schedulable", "cells_used_by_others"):
            if not self.engine.knows_node(node.name):
                continue
            self.engine.set_node_health(node.name, node.healthy)
            self.engine.set_node_foreign_use(node.name, node.cells_used_by_others)

    # -- the cycle -------------------------------------------------------------------

    def run_cycle(self, now=None):
        now = time.time() if now is None else now
        self._ips = None
        # Reading the whole configuration costs a query per table and a walk of every
        # physical cell: do it with the full passes, so a change applies within one.
        full = self.engine is None or self._cycles % FULL_PASS_EVERY == 0
        self._configuration_fresh = full
        self._creations_left = settings.PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE
        if full:
            self.refresh_configuration()
        self._cycles += 1
        # Observing first: the node changes it delivers reach the engine before this cycle places.
        for step in (self.observe, self.delete_finished_pods, self.sync_node_health,
                     lambda: self.advance_jobs(full=full), lambda: self.schedule(now), self.create_missing_pods,
                     lambda: self.create_retried_pods(full=full), lambda: self.advance_jobs(full=full)):
            self._guard(write=False)
            step()

    # -- observing pods --------------------------------------------------------------

    def observe(self):
        """Apply what the pods say since the cursor, then move it: a cycle cut short while
        applying them (the API down while a log is read or a pod deleted) sees them again."""
        if self.cursor is None:
            cursor = self.backend.cursor()
            observations = self.backend.poll(None)
            self._apply_relist(observations)
            self.apply_observations(observations)
            self.cursor = cursor
            return
        try:
            observations = self.backend.poll(self.cursor)
        except CursorExpiredError:
            self.cursor = None
            return self.observe()
        self.apply_observations(observations)
        if observations:
            self.cursor = observations[-1].resource_version

    def _apply_relist(self, live):
        """After a relist: pods we recorded as created that are not live any more vanished."""
        names = {o.name for o in live}
        self._live = set(names)
        self._ended, self._waiting = {}, {}
        self._events_stored = {name: kept for name, kept in self._events_stored.items() if name in names}
        missing = (
            TaskAttempt.objects.filter(task__job_attempt__job__virtual_cluster__cluster=self.cluster)
            .filter(completed_at__isnull=True)
            .exclude(pod_uid="")
            .exclude(pod_name__in=names)
        )
        for ta in missing.select_related("task__job_attempt"):
            self._complete_task_attempt(ta, exitcodes.POD_EXTERNAL_DELETED, "the pod vanished")
        # Pods that carry pai's labels but belong to no task attempt are orphans. A pod whose
        # task attempt completed was not deleted yet (the worker stopped in between): it goes
        # now, its log is kept.
        known = dict(TaskAttempt.objects.filter(pod_name__in=names).values_list("pod_name", "completed_at"))
        for observation in live:
            if observation.name not in known and LABEL_JOB in observation.labels:
                log.warning("deleting orphaned pod %s", observation.name)
                self._delete_pod(observation.name, observation.uid)
            elif known.get(observation.name) is not None and observation.terminal and not observation.deletion_requested:
                self._delete_pod(observation.name, observation.uid, grace_seconds=0)

    def apply_observations(self, observations):
        """Apply a batch of pod observations: a few queries per batch, not per pod."""
        latest = {}
        for observation in observations:
            latest[observation.name] = observation  # the feed is ordered: the last one wins
            if observation.deleted:
                self._live.discard(observation.name)
                self._events_stored.pop(observation.name, None)
            else:
                self._live.add(observation.name)
        for name, observation in list(latest.items()):
            uid = self._ended.get(name)
            if uid is not None and uid == observation.uid:
                del latest[name]
                if observation.deleted:
                    del self._ended[name]
                continue
            uid = self._waiting.pop(name, None)
            if uid is not None and uid == observation.uid and _still_waiting(observation):
                del latest[name]
                self._waiting[name] = uid
        if not latest:
            return
        attempts = {}
        names = list(latest)
        for chunk in range(0, len(names), 1000):
            self._guard(write=False)
            for ta in TaskAttempt.objects.filter(pod_name__in=names[chunk:chunk + 1000]).select_related(
                "task__job_attempt"
            ):
                attempts[ta.pod_name] = ta
        changed, running_tasks, completions, finished, logs = [], [], [], [], {}
        self._prefetch_logs(latest, attempts)
        for name, observation in latest.items():
            ta = attempts.get(name)
            if ta is None or ta.completed_at is not None:
                continue
            if ta.pod_uid and observation.uid and ta.pod_uid != observation.uid:
                continue  # another incarnation of the name: not ours
            dirty = False
            if not ta.pod_uid and observation.uid:
                ta.pod_uid, dirty = observation.uid, True
            if observation.node and observation.node != ta.node_name:
                ta.node_name, dirty = observation.node, True
            if observation.ip and not ta.ip:
                ta.ip, dirty = observation.ip, True
            if observation.phase == "Running" and ta.state != JobState.RUNNING:
                ta.state, dirty = JobState.RUNNING, True
                # The task runs as its current attempt does (OpenPAI shows RUNNING, not WAITING).
                ta.task.state = JobState.RUNNING
                running_tasks.append(ta.task)
            if not ta.started_at and (observation.started_at or observation.phase == "Running"):
                ta.started_at, dirty = _dt(observation.started_at) or timezone.now(), True
            if dirty:
                changed.append(ta)
                self._touched.add(ta.task.job_attempt_id)
            if observation.terminal or observation.deleted:
                kept = self._kept_log(ta, observation)
                if kept is not None:
                    logs[ta.pk] = kept
                completions.append(self._completion_of(ta, observation, kept))
                if observation.terminal and not (observation.deleted or observation.deletion_requested):
                    finished.append(ta)
            elif observation.container_reason in IMAGE_PULL_FAILURES:
                # The kubelet would retry the pull forever; OpenPAI fails the task (254).
                self._delete_pod(ta.pod_name, ta.pod_uid)
                row = exitcodes.classify(None, container_reason=observation.container_reason)
                message = "; ".join(p for p in (observation.container_reason, observation.message) if p)
                completions.append((ta, row.code, message, observation, row))
        bulk_set(TaskAttempt, changed, ["pod_uid", "node_name", "ip", "state", "started_at"])
        bulk_set(Task, running_tasks, ["state"])
        self._store_events([attempts[name] for name in latest if name in attempts])
        self._complete_task_attempts(completions, logs)
        # Stored: the finished pods go, so that the cluster holds only live pods.
        for ta in finished:
            self._finished_pods[ta.pod_name] = ta.pod_uid
        self._prefetched = {}
        self.delete_finished_pods()

    def delete_finished_pods(self):
        """Delete the ended pods whose log end and exit are stored, PAI_KUBE_CONCURRENCY at
        a time. One that could not be deleted (the API went down) stays listed and goes in
        a later cycle."""
        self._finished_pods = {name: uid for name, uid in self._finished_pods.items() if name in self._live}
        for chunk in self._chunks(list(self._finished_pods.items())):
            for _item in chunk:
                self._guard()
            outcomes = self._in_parallel(
                lambda item: self.backend.delete_pod(item[0], uid=item[1] or None, grace_seconds=0), chunk
            )
            errors = []
            for (name, _uid), (_gone, error) in zip(chunk, outcomes):
                if error is None or isinstance(error, PodConflictError):
                    del self._finished_pods[name]
                else:
                    errors.append(error)
            if errors:
                raise errors[0]

    def _prefetch_logs(self, latest, attempts):
        """The log ends the loop below reads (pods that ended and are still there), read
        PAI_KUBE_CONCURRENCY at a time beforehand."""
        self._prefetched = {}
        if self.backend.logs_outlive_pods or self.concurrency < 2:
            return
        names = [
            name for name, observation in latest.items()
            if observation.terminal and not observation.deleted and name in attempts
            and attempts[name].completed_at is None
            and not (attempts[name].pod_uid and observation.uid and attempts[name].pod_uid != observation.uid)
        ]
        for chunk in self._chunks(names):
            for name, (text, error) in zip(chunk, self._in_parallel(lambda n: self._read_log(n, KEPT_LOG_LINES), chunk)):
                if error is not None:
                    raise error
                self._prefetched[name] = text

    def _kept_log(self, ta, observation):
        """(text, truncated) of the end of an ended pod's log, for backends that forget the
        log with the pod; None when the backend keeps it (or the pod is gone already)."""
        if self.backend.logs_outlive_pods or observation.deleted:
            return None
        text = self._prefetched.pop(ta.pod_name, None)
        if text is None:
            text = self._read_log(ta.pod_name, KEPT_LOG_LINES)
        data = text.encode()
        limit = settings.PAI_TASK_LOG_KEEP_BYTES
        if len(data) <= limit:
            return text, text.count("\n") >= KEPT_LOG_LINES
        return data[-limit:].decode(errors="ignore"), True

    def _completion_of(self, ta, observation, kept=None):
        """(task attempt, code, diagnostics, observation, exit row) for a pod that ended."""
        attempt = ta.task.job_attempt
        if attempt.sub_state in DELETION_SUBSTATES and attempt.exit_code is not None:
            code = self._code_for_deleted_tasks(attempt.exit_code)
            if observation.terminal and observation.exit_code == 0 and not observation.deletion_requested:
                code = exitcodes.SUCCEEDED
            return ta, code, observation.message, observation, None
        log_tail = ""
        if kept is not None:
            log_tail = "\n".join(kept[0].splitlines()[-exitcodes.LOG_TAIL_LINES:])
        elif observation.terminal and observation.exit_code not in (0, None):
            log_tail = self._read_log(ta.pod_name, exitcodes.LOG_TAIL_LINES)
        exit_ = lifecycle.task_exit(observation, log_tail)
        diagnostics = "; ".join(p for p in (observation.reason, observation.container_reason, observation.message) if p)
        return ta, exit_.code, diagnostics, observation, exit_.row

    def _log_tail(self, ta):
        """The last lines of an ended task attempt's log: kept by the worker, or the backend's."""
        kept = TaskLog.objects.filter(pk=ta.pk).values_list("text", flat=True).first()
        if kept is not None:
            return "\n".join(kept.splitlines()[-exitcodes.LOG_TAIL_LINES:])
        return self._read_log(ta.pod_name, exitcodes.LOG_TAIL_LINES)

    def _read_log(self, name, lines):
        try:
            return self.backend.read_log(name, tail_lines=lines)
        except PodNotFoundError:
            return ""  # never created: no log
        except (LeaseLost, ClusterUnavailableError):
            raise  # the cycle stops; the completion is seen again
        except Exception:  # a log that cannot be read only loses the pattern match
            log.exception("cannot read the log of %s", name)
            return ""

    def _store_events(self, task_attempts):
        """Store the backend's new events about these task attempts' pods. What is stored
        already is remembered per open task attempt (read from the database once, for
        attempts this controller has not seen), so a pod's later changes re-read nothing."""
        remembered = self._events_stored
        unknown = [ta for ta in task_attempts if remembered.get(ta.pod_name, (None,))[0] != ta.pk]
        for start in range(0, len(unknown), 1000):
            chunk = {ta.pk: set() for ta in unknown[start:start + 1000]}
            for pk, reason, at in JobEvent.objects.filter(task_attempt__in=list(chunk)).values_list(
                "task_attempt_id", "reason", "first_seen"
            ):
                chunk[pk].add((reason, at))
            for ta in unknown[start:start + 1000]:
                remembered[ta.pod_name] = (ta.pk, chunk[ta.pk])
        new = []
        for ta in task_attempts:
            try:
                events = self.backend.read_events(ta.pod_name)
            except (LeaseLost, ClusterUnavailableError):
                raise
            except Exception:
                log.exception("cannot read the events of %s", ta.pod_name)
                continue
            stored = remembered[ta.pod_name][1]
            for event in events:
                at = _dt(event.at)
                if (event.reason, at) in stored:
                    continue
                stored.add((event.reason, at))
                new.append(
                    JobEvent(
                        job_id=ta.task.job_attempt.job_id,
                        task_attempt_id=ta.pk,
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
        try:
            bulk_insert(JobEvent, new)
        except Exception:
            # Not stored: forget what was remembered, so that the next observation tries again.
            for ta in task_attempts:
                remembered.pop(ta.pod_name, None)
            raise

    @staticmethod
    def _code_for_deleted_tasks(attempt_code):
        return attempt_code if attempt_code in CODES_SHARED_WITH_TASKS else exitcodes.ATTEMPT_COMPLETION

    def _complete_task_attempt(self, ta, code, diagnostics="", observation=None, row=None):
        self._complete_task_attempts([(ta, code, diagnostics, observation, row)])

    def _complete_task_attempts(self, completions, logs=None):
        """Record how task attempts ended (and their tasks) and the ends of their logs
        (`logs`: task attempt pk → (text, truncated)), in a few statements per batch.

        Without gang allocation a task follows its own retry policy (`taskRetryCount`): a
        retried task gets its next task attempt here, on the same node, devices and ports,
        and its pod is created by `create_retried_pods`.
        """
        done, tasks, retried = [], [], []
        now = timezone.now()
        retrying = self._attempts_retrying_tasks(completions)
        for ta, code, diagnostics, observation, row in completions:
            row = row or exitcodes.row(code)
            finished = _dt(observation.finished_at) if observation is not None else None
            ta.state = lifecycle.user_state(JobSubState.COMPLETED, code).value
            ta.exit_code, ta.exit_spec_code = code, row.code
            ta.diagnostics = (diagnostics or "")[:4000]
            ta.completed_at = finished or now
            ta.task.state = ta.state
            self._touched.add(ta.task.job_attempt_id)
            done.append(ta)
            tasks.append(ta.task)
            attempt = retrying.get(ta.task.job_attempt_id)
            decision = self._task_retry(attempt, ta, code, row) if attempt is not None else None
            if decision is not None and decision.retry:
                ta.task.retries = decision.state.retries
                ta.task.accountable_retries = decision.state.counted
                ta.task.state = JobState.WAITING
                retried.append(self._next_task_attempt(attempt, ta))
                self._retried.add(attempt.pk)
                continue  # the next task attempt keeps the ports
            ip = self._node_ips().get(ta.node_name, "127.0.0.1")
            for values in (ta.ports or {}).values():
                self.ports.release(ip, values)
        with transaction.atomic():
            bulk_set(TaskAttempt, done, ["state", "exit_code", "exit_spec_code", "diagnostics", "completed_at"])
            bulk_set(Task, tasks, ["state", "retries", "accountable_retries"])
            TaskAttempt.objects.bulk_create(retried)
            bulk_insert(
                TaskLog,
                [TaskLog(task_attempt_id=pk, text=text, truncated=truncated) for pk, (text, truncated) in (logs or {}).items()],
                ignore_conflicts=True,
            )
        for ta in done:
            if ta.pod_uid and ta.pod_name in self._live:
                self._ended[ta.pod_name] = ta.pod_uid

    @staticmethod
    def _attempts_retrying_tasks(completions):
        """{attempt id: attempt, with its job} of the completions' attempts whose jobs run
        without gang allocation (their tasks retry on their own); one query."""
        ids = {ta.task.job_attempt_id for ta, *_ in completions}
        if not ids:
            return {}
        return JobAttempt.objects.filter(pk__in=ids, job__gang_allocation=False).select_related("job").only(
            "id", "index", "sub_state", "job__id", "job__spec", "job__submitted_at", "job__execution_type",
        ).in_bulk()

    @staticmethod
    def _task_retry(attempt, ta, code, row):
        """FrameworkController's task retry policy for a task attempt that ended on its own
        (not while its attempt ends, nor after a stop); None when it does not apply."""
        if attempt.job.execution_type == "STOP" or attempt.sub_state in DELETION_SUBSTATES:
            return None
        if code in (exitcodes.STOP_REQUESTED, exitcodes.ATTEMPT_COMPLETION, exitcodes.STOPPED_FOR_LOW_GPU_USE):
            return None
        spec = attempt.job.spec["taskRoles"].get(ta.task.task_role) or {}
        state = lifecycle.RetryState(retries=ta.task.retries, counted=ta.task.accountable_retries)
        return lifecycle.decide_task_retry(code, row, int(spec.get("taskRetryCount", 0)), state, gang_allocation=False)

    def _next_task_attempt(self, attempt, ta):
        index = ta.index + 1
        name = launch.pod_name(launch.job_key(attempt.job), ta.task.task_role, ta.task.index, attempt.index, index)
        return TaskAttempt(
            task=ta.task,
            index=index,
            pod_name=name,
            node_name=ta.node_name,
            device_indices=list(ta.device_indices),
            ip=ta.ip,
            ports=dict(ta.ports or {}),
            log_path=str(local_state_dir(self.cluster) / "pods" / name / "all.log"),
        )

    # -- job lifecycles --------------------------------------------------------------

    def advance_jobs(self, full=True):
        """Move open attempts along: launched, ended by its completion policy or a stop,
        pods deleted, completed (then retried or the job completed). Writes are batched.

        A full pass looks at every open attempt (crash repair relies on it); otherwise only
        at those whose pods changed, those being deleted and those of stopped jobs.
        """
        self._finish_stops_between_attempts()
        attempts = JobAttempt.objects.filter(job__virtual_cluster__cluster=self.cluster, completed_at__isnull=True)
        if not full:
            attempts = attempts.filter(
                Q(pk__in=list(self._touched)) | Q(sub_state__in=DELETION_SUBSTATES) | Q(job__execution_type="STOP")
            )
        self._touched = set()
        # The job's spec is needed (completion policy); its other documents are not.
        attempts = list(
            attempts.select_related("job")
            .defer("job__protocol_text", "job__launch", "job__placement", "job__warnings", "job__leaf_cells")
            .order_by("job_id", "index")
        )
        by_attempt = {}
        task_attempts = TaskAttempt.objects.filter(task__job_attempt__in=[a.pk for a in attempts]).select_related("task")
        for ta in task_attempts.order_by("task__task_role", "task__index", "index"):
            by_attempt.setdefault(ta.task.job_attempt_id, []).append(ta)

        launched, ending = [], []
        for attempt in attempts:
            tas = by_attempt.get(attempt.pk, [])
            if attempt.job.execution_type == "STOP" and attempt.sub_state not in DELETION_SUBSTATES:
                # A stop pai decided itself (the idle-GPU rule) ends with its own code and reason.
                code = attempt.job.stop_exit_code if attempt.job.stop_exit_code is not None else exitcodes.STOP_REQUESTED
                ending.append((attempt, code, attempt.job.stop_reason or "stopped by the user", None, None))
                continue
            if attempt.sub_state in WAITING_SUBSTATES and tas and all(ta.pod_uid and ta.started_at for ta in tas):
                launched.append(attempt)
            if attempt.sub_state in WAITING_SUBSTATES + (JobSubState.ATTEMPT_RUNNING,):
                try:
                    outcome = self._evaluate(attempt.job, tas)
                except NOT_ONE_JOBS_FAILURE:
                    raise
                except Exception as exc:
                    ending.append(self._unprocessable(attempt, "apply its completion policy", exc))
                    continue
                if outcome is not None:
                    ending.append((attempt, outcome.exit_code, outcome.message, outcome.exit_row, outcome.task))
        self._launch(launched)
        self._begin_deletions(ending, by_attempt)

        requested, finishing = [], []
        for attempt in attempts:
            if attempt.sub_state not in DELETION_SUBSTATES:
                continue
            tas = by_attempt.get(attempt.pk, [])
            if attempt.sub_state == JobSubState.ATTEMPT_DELETION_PENDING:
                # Delete once: deletions are idempotent but not free. A crash before the
                # state below is written repeats them, harmlessly.
                for ta in tas:
                    if ta.completed_at is None:
                        existed = self._delete_pod(ta.pod_name, ta.pod_uid)
                        if not existed and not ta.pod_uid:
                            # Never created (or never seen): nothing to wait for.
                            self._complete_task_attempt(ta, self._code_for_deleted_tasks(attempt.exit_code), "not created")
                if any(ta.completed_at is None for ta in tas):
                    requested.append(attempt)
            if all(ta.completed_at is not None for ta in tas) and not self._still_stopping(attempt, tas):
                finishing.append(attempt)
        self._set_sub_states(requested, JobSubState.ATTEMPT_DELETION_REQUESTED)
        if requested:
            failpoint("after-deletion-requested")
        self.finish_attempts(finishing)

    def _still_stopping(self, attempt, task_attempts):
        """A preempted job whose pods still exist (on Kubernetes: not deleted, terminating
        or ended) keeps its cells: its preemptor's pods are not created before they go."""
        if self.engine.state_of(engine_job_id(attempt.job_id)) != "terminating":
            return False
        return any(ta.pod_name in self._live for ta in task_attempts)

    def _finish_stops_between_attempts(self):
        """A stop that came while the job waited to be retried has no pods to delete."""
        stopped = self._jobs().filter(execution_type="STOP", state=JobState.STOPPING, placement__isnull=True)
        last = dict(
            stopped.exclude(attempts__completed_at__isnull=True).values_list("pk").annotate(index=Max("attempts__index"))
        )
        if not last:
            return
        with transaction.atomic():
            Job.objects.filter(pk__in=list(last), state=JobState.STOPPING).update(
                state=JobState.STOPPED,
                sub_state=JobSubState.COMPLETED,
                app_exit_code=Coalesce("stop_exit_code", Value(exitcodes.STOP_REQUESTED)),
                completed_at=timezone.now(),
                wait_reason="",
                queue_position=None,
            )
            notifications.record_transitions([(pk, index, "stopped") for pk, index in last.items()])

    @staticmethod
    def _unprocessable(attempt, doing, exc):
        """The deletion entry of an attempt whose job's data made a step fail: it ends as an
        invalid pod spec (permanent, not retried), and the cycle goes on for the others."""
        log.exception("job %s: cannot %s", attempt.job_id, doing)
        message = f"pai could not {doing} from the job's document ({type(exc).__name__}: {exc})"
        return attempt, exitcodes.POD_CREATION_PERMANENT_ERROR, message, None, None

    def _evaluate(self, job, task_attempts):
        """Replay the completed tasks in completion order through the completion policy.

        A task is completed when its latest task attempt is: a retried one has a newer attempt.
        """
        latest = {}
        for ta in task_attempts:
            if ta.task_id not in latest or ta.index > latest[ta.task_id].index:
                latest[ta.task_id] = ta
        completed = sorted((ta for ta in latest.values() if ta.completed_at), key=lambda ta: (ta.completed_at, ta.pk))
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
            succeeded, failed = role.succeeded + task.succeeded, role.failed + (not task.succeeded)
            progress[ta.task.task_role] = lifecycle.TaskRoleProgress(role.name, role.instances, role.policy, succeeded, failed)
            outcome = lifecycle.evaluate_completion(list(progress.values()), task)
            if outcome.status != "running":
                return outcome
        return None

    def _launch(self, attempts):
        """Every pod of these attempts has started: the attempts (and their jobs) run."""
        if not attempts:
            return
        now = timezone.now()
        with transaction.atomic():
            JobAttempt.objects.filter(pk__in=[a.pk for a in attempts]).update(
                sub_state=JobSubState.ATTEMPT_RUNNING, state=JobState.RUNNING, launched_at=now
            )
            Job.objects.filter(pk__in=[a.job_id for a in attempts]).update(
                sub_state=JobSubState.ATTEMPT_RUNNING, state=JobState.RUNNING, launched_at=now, wait_reason=""
            )
            notifications.record_transitions([(a.job_id, a.index, "running") for a in attempts])
        for attempt in attempts:
            attempt.sub_state, attempt.state, attempt.launched_at = JobSubState.ATTEMPT_RUNNING, JobState.RUNNING, now

    def _set_sub_states(self, attempts, sub_state):
        """Move attempts (and their jobs) to `sub_state`: one update per resulting user state."""
        groups = {}
        for attempt in attempts:
            attempt.sub_state = sub_state
            attempt.state = lifecycle.user_state(sub_state, attempt.exit_code).value
            groups.setdefault(attempt.state, []).append(attempt)
        with transaction.atomic():
            for state, members in groups.items():
                JobAttempt.objects.filter(pk__in=[a.pk for a in members]).update(sub_state=sub_state, state=state)
                Job.objects.filter(pk__in=[a.job_id for a in members]).update(sub_state=sub_state, state=state)

    def _begin_deletions(self, entries, by_attempt=None):
        """Write why each attempt ends before deleting anything (the intent survives a crash).

        `entries` are (attempt, exit code, message, exit row or None, triggering task or None).
        """
        if not entries:
            return
        attempts = []
        for attempt, code, message, row, task in entries:
            row = row or exitcodes.row(code)
            tas = by_attempt.get(attempt.pk, []) if by_attempt is not None else None
            attempt.exit_code = code
            attempt.exit_spec_code = row.code
            attempt.exit_diagnostics = self._diagnostics(row, code, message, task, tas)
            attempt.exit_trigger_message = message or ""
            if task is not None:
                attempt.trigger_task_role, attempt.trigger_task_index = task.task_role, task.index
            attempt.sub_state = JobSubState.ATTEMPT_DELETION_PENDING
            attempt.state = lifecycle.user_state(attempt.sub_state, code).value
            attempts.append(attempt)
        with transaction.atomic():
            bulk_set(JobAttempt, attempts, [
                "exit_code", "exit_spec_code", "exit_diagnostics", "exit_trigger_message", "trigger_task_role",
                "trigger_task_index", "sub_state", "state",
            ])
            groups = {}
            for attempt in attempts:
                groups.setdefault(attempt.state, []).append(attempt.job_id)
            for state, job_ids in groups.items():
                Job.objects.filter(pk__in=job_ids).update(sub_state=JobSubState.ATTEMPT_DELETION_PENDING, state=state)
        failpoint("after-deletion-pending")

    def _diagnostics(self, row, code, message, task, task_attempts):
        shown = row.as_dict(code)
        lines = [f"{shown['code']} {row.phrase}: {row.reason}", "What to do: " + " ".join(row.solution)]
        if message:
            lines.append(f"Why: {message}")
        if task is not None:
            lines.append(f"Triggered by task {task.task_role}[{task.index}] (exit code {task.exit_code}).")
            if row.type != "succeeded":
                trigger = [
                    ta for ta in task_attempts or ()
                    if ta.task.task_role == task.task_role and ta.task.index == task.index
                ]
                if trigger and trigger[-1].diagnostics:
                    lines.append(f"The task's pod reported: {trigger[-1].diagnostics}")
                tail = self._log_tail(trigger[-1]) if trigger else ""
                if tail:
                    lines.append("Last lines of its log:\n" + "\n".join(tail.splitlines()[-20:]))
        return "\n".join(lines)

    def _delete_pod(self, name, uid, grace_seconds=None):
        self._guard()
        try:
            return self.backend.delete_pod(name, uid=uid or None, grace_seconds=grace_seconds)
        except PodConflictError:
            return False

    def finish_attempts(self, attempts):
        """Their pods are gone: retry each job (back to the queue) or complete it."""
        if not attempts:
            return
        now = timezone.now()
        with transaction.atomic():
            open_ids = set(
                JobAttempt.objects.select_for_update()
                .filter(pk__in=[a.pk for a in attempts], completed_at__isnull=True)
                .values_list("pk", flat=True)
            )
            attempts = [a for a in attempts if a.pk in open_ids]
            jobs = (
                Job.objects.select_for_update()
                .defer("protocol_text", "spec", "launch", "warnings", "leaf_cells", "placement")
                .in_bulk([a.job_id for a in attempts])
            )
            # Retries that used up jobRetryCount: earlier attempts that failed for unknown reasons.
            counted = {}
            for job_id, code in JobAttempt.objects.filter(
                job_id__in=list(jobs), completed_at__isnull=False
            ).values_list("job_id", "exit_spec_code"):
                if code is not None and exitcodes.row(code).type == "unknown":
                    counted[job_id] = counted.get(job_id, 0) + 1
            transitions = []
            for attempt in attempts:
                job = jobs[attempt.job_id]
                row = exitcodes.row(attempt.exit_spec_code if attempt.exit_spec_code is not None else attempt.exit_code)
                state = lifecycle.RetryState(
                    retries=job.retries, counted=counted.get(job.pk, 0), user=job.retries_user,
                    platform=job.retries_platform, resource=job.retries_resource,
                )
                decision = lifecycle.decide_job_retry(
                    attempt.exit_code, row, job.job_retry_count, state, stop_requested=job.execution_type == "STOP"
                )
                attempt.completed_at = now
                attempt.sub_state = JobSubState.COMPLETED
                attempt.state = lifecycle.user_state(JobSubState.COMPLETED, attempt.exit_code).value
                job.placement = None
                job.queue_position = None
                if decision.retry:
                    job.retries = decision.state.retries
                    job.retries_user = decision.state.user
                    job.retries_platform = decision.state.platform
                    job.retries_resource = decision.state.resource
                    job.state, job.sub_state = JobState.WAITING, JobSubState.ATTEMPT_CREATION_PENDING
                    job.wait_reason = f"Retrying after {row.phrase} ({attempt.exit_code}); waiting for cells."
                    transitions.append((job.pk, attempt.index, "retried"))
                else:
                    job.state = decision.final_state.value
                    job.sub_state = JobSubState.COMPLETED
                    job.app_exit_code = decision.exit_code
                    job.completed_at = now
                    job.wait_reason = ""
                    transitions.append((job.pk, attempt.index, job.state.lower()))
            bulk_set(JobAttempt, attempts, ["completed_at", "sub_state", "state"])
            usage_ledger.record_attempts(attempts, now)
            failpoint("during-completion")
            bulk_set(Job, [jobs[a.job_id] for a in attempts], [
                "placement", "queue_position", "retries", "retries_user", "retries_platform", "retries_resource",
                "state", "sub_state", "wait_reason", "app_exit_code", "completed_at",
            ])
            notifications.record_transitions(transitions)
        for attempt in attempts:
            self.engine.release(engine_job_id(attempt.job_id))

    def _end_attempt_of(self, job_pk, code, message):
        attempt = (
            JobAttempt.objects.filter(job_id=job_pk, completed_at__isnull=True)
            .select_related("job__owner", "job__virtual_cluster", "job__tenant")
            .first()
        )
        if attempt is not None and attempt.sub_state not in DELETION_SUBSTATES:
            self._begin_deletions([(attempt, code, message, None, None)])

    # -- scheduling ------------------------------------------------------------------

    def schedule(self, now):
        queue = list(self._queue().select_related("owner", "virtual_cluster").order_by("-priority", "submitted_at", "pk"))
        jobs, gangs = {}, []
        for job in queue:
            with self._isolated(job):
                gangs.append(gang_request(job))
                jobs[engine_job_id(job.pk)] = job
        result = self.engine.schedule(gangs, now, budgets=usage_budgets.engine_budgets(self.cluster, now))
        # A job refused for good may only look invalid to a stale configuration (a VC or SKU
        # added since it was read): read it again, and decide nothing from this cycle (the
        # rebuilt engine forgets its decisions; the next cycle makes them afresh).
        if result.rejected and not self._configuration_fresh:
            self._configuration_fresh = True
            if self.refresh_configuration():
                return
        figures.decisions_applied(self.cluster.name, result)
        for preemption in result.preemptions:
            self._apply_preemption(preemption)
        # A bounded cycle: the first placements in the engine's order are kept, the others
        # are given back and decided again next cycle (their pods would wait anyway).
        cap = settings.PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE
        placements, deferred = result.placements[:cap], result.placements[cap:]
        for allocation in deferred:
            self.engine.release(allocation.job_id)
        if deferred:
            # One statement, and only for jobs that do not say so yet.
            Job.objects.filter(pk__in=[int(a.job_id) for a in deferred], placement__isnull=True).exclude(
                wait_reason=DEFERRED_REASON
            ).update(wait_reason=DEFERRED_REASON, queue_position=None)
        self._persist_placements(list(placements), jobs)
        for rejection in result.rejected:
            job = jobs.get(rejection.job_id)
            if job is not None:
                self._reject(job, f"{rejection.field}: {rejection.message}")
        for job_id in result.expired:
            self._end_attempt_of(int(job_id), -1004, "the job ran past its maximum runtime")
        self._record_waits(jobs, result.waiting)
        self._record_reservations([
            job for job_id, job in jobs.items() if self.engine.state_of(job_id) != "running"
        ])

    def _record_reservations(self, jobs):
        """Store the cells each waiting job holds for its preemption (what a restart
        restores), and forget those of jobs that hold none any more."""
        for job in jobs:
            allocation = self.engine.allocation(engine_job_id(job.pk))
            wanted = placement_json(allocation) if allocation is not None and allocation.state == "preempting" else None
            if wanted != job.reservation:
                Job.objects.filter(pk=job.pk, placement__isnull=True).update(reservation=wanted)
                job.reservation = wanted

    def _apply_preemption(self, preemption):
        job_pk = int(preemption.job_id)
        if preemption.lazy:
            allocation = next((a for a in self.engine.allocations() if a.job_id == preemption.job_id), None)
            if allocation is not None:
                Job.objects.filter(pk=job_pk).update(placement=placement_json(allocation))
            return
        self._end_attempt_of(job_pk, exitcodes.POD_PREEMPTED, f"preempted by job {preemption.by_job}")
        # Its cells stay its own until its pods are gone: a restart must know it is stopping.
        allocation = self.engine.allocation(preemption.job_id)
        if allocation is not None:
            Job.objects.filter(pk=job_pk, placement__isnull=False).update(placement=placement_json(allocation))

    def _persist_placements(self, allocations, jobs):
        """Persist the cycle's placements, PERSIST_BATCH jobs per transaction and a few
        statements per batch (not per job or per pod). A batch that fails for a reason
        that is not one job's own goes again job by job, so that only that job fails."""
        node_ips = self._node_ips()
        for start in range(0, len(allocations), PERSIST_BATCH):
            self._guard(write=False)  # renews the lease when half of it is spent: placing thousands takes a while
            chunk = allocations[start:start + PERSIST_BATCH]
            try:
                self._persist_chunk(chunk, jobs, node_ips)
            except NOT_ONE_JOBS_FAILURE:
                raise
            except Exception:
                log.warning("cluster %s: placements persisted one job at a time after a failure", self.cluster.name,
                            exc_info=True)
                for allocation in chunk:
                    self._guard(write=False)
                    with self._isolated(jobs[allocation.job_id], allocation.job_id):
                        self._persist_chunk([allocation], jobs, node_ips)

    def _persist_chunk(self, chunk, jobs, node_ips):
        """One transaction for the chunk's placements; the host ports it reserved go back
        to the allocator when it fails."""
        reserved = []
        try:
            with transaction.atomic():
                persisted = self._persist_batch(chunk, jobs, node_ips, reserved)
        except Exception:
            for host, ports in reserved:
                self.ports.release(host, ports)
            raise
        for _job in range(persisted):
            failpoint("after-placement-persisted")

    def _persist_batch(self, chunk, jobs, node_ips, reserved):
        ids = [jobs[allocation.job_id].pk for allocation in chunk]
        locked = {
            row.pk: row
            for row in Job.objects.select_for_update().filter(pk__in=ids).only("pk", "placement", "state", "execution_type")
        }
        last = dict(
            JobAttempt.objects.filter(job_id__in=ids).values("job_id").annotate(last=Max("index")).values_list("job_id", "last")
        )
        planned = []
        for allocation in chunk:
            job = jobs[allocation.job_id]
            row = locked.get(job.pk)
            if row is None or row.placement is not None or row.state != JobState.WAITING or row.execution_type != "START":
                self.engine.release(allocation.job_id)
                continue
            placement = placement_json(allocation)
            index = 0 if last.get(job.pk) is None else last[job.pk] + 1
            try:
                ports = launch.allocate_ports(job, index, placement, node_ips, self.ports)
            except PortsExhaustedError:
                with self._isolated(job, allocation.job_id):
                    raise  # the job waits for its ports (or fails) alone
                continue
            for pod in placement["pods"]:
                for values in ports[(pod["task_role"], pod["index"])].values():
                    reserved.append((node_ips[pod["node"]], values))
            planned.append((job, placement, ports, index))
        attempts = JobAttempt.objects.bulk_create([
            JobAttempt(job_id=job.pk, index=index, state=JobState.WAITING, sub_state=JobSubState.ATTEMPT_CREATION_REQUESTED)
            for job, _placement, _ports, index in planned
        ])
        tasks = Task.objects.bulk_create([
            Task(job_attempt=attempt, task_role=pod["task_role"], index=pod["index"])
            for attempt, (_job, placement, _ports, _index) in zip(attempts, planned)
            for pod in placement["pods"]
        ], batch_size=1000)
        pods = ((job, ports, index, pod) for job, placement, ports, index in planned for pod in placement["pods"])
        TaskAttempt.objects.bulk_create([
            self._first_task_attempt(task, launch.job_key(job), index, pod, ports, node_ips)
            for task, (job, ports, index, pod) in zip(tasks, pods)
        ], batch_size=1000)
        now = timezone.now()
        bulk_set(Job, [
            Job(pk=job.pk, placement=placement, reservation=None, sub_state=JobSubState.ATTEMPT_CREATION_REQUESTED,
                state=JobState.WAITING, created_at=now, wait_reason="", queue_position=None)
            for job, placement, _ports, _index in planned
        ], ["placement", "reservation", "sub_state", "state", "created_at", "wait_reason", "queue_position"])
        return len(planned)

    def _first_task_attempt(self, task, key, index, pod, ports, node_ips):
        """The first task attempt of `task` (attempt `index` of the job keyed `key`), on
        the node and devices its placement gives `pod`, with the host ports allocated to it."""
        name = launch.pod_name(key, pod["task_role"], pod["index"], index, 0)
        return TaskAttempt(
            task=task,
            index=0,
            pod_name=name,
            node_name=pod["node"],
            device_indices=list(pod["devices"]),
            ip=node_ips.get(pod["node"]),
            ports=ports[(pod["task_role"], pod["index"])],
            log_path=str(local_state_dir(self.cluster) / "pods" / name / "all.log"),
        )

    @contextmanager
    def _isolated(self, job, engine_id=None):
        """A step for one waiting job that fails for that job alone: the job waits (for host
        ports) or fails with the reason, and the cycle goes on for every other job. Database
        errors and a lost lease are not the job's: they end the cycle as before. `engine_id`: the engine's
        placement of the job, released when the step fails."""
        try:
            yield
        except NOT_ONE_JOBS_FAILURE:
            raise
        except PortsExhaustedError as exc:
            if engine_id is not None:
                self.engine.release(engine_id)
            if exc.wanted > exc.total:
                self._reject(job, f"its tasks need {exc.wanted} host ports on {exc.host}, which has {exc.total} in all.")
            else:
                Job.objects.filter(pk=job.pk, placement__isnull=True).update(
                    wait_reason=f"Waiting for host ports: its tasks need {exc.wanted} on {exc.host}, where "
                                f"{exc.free} are free.",
                    queue_position=None,
                )
        except Exception as exc:
            log.exception("job %s: cannot be scheduled", job.pk)
            if engine_id is not None:
                self.engine.release(engine_id)
            self._reject(job, f"pai could not schedule it ({type(exc).__name__}: {exc}); the worker's log has more.")

    def _reject(self, job, message):
        row = exitcodes.row(exitcodes.POD_CREATION_PERMANENT_ERROR)
        with transaction.atomic():
            failed = Job.objects.filter(pk=job.pk, placement__isnull=True, state=JobState.WAITING).update(
                reservation=None,
                state=JobState.FAILED,
                sub_state=JobSubState.COMPLETED,
                app_exit_code=row.code,
                completed_at=timezone.now(),
                wait_reason=f"This job can never run here: {message}",
                queue_position=None,
            )
            if failed:
                notifications.record_transitions([(job.pk, -1, "failed")])

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
            .select_related("job__owner", "job__virtual_cluster", "job__tenant", "job__secret")
            .order_by("job_id")
        )
        node_ips = self._node_ips()
        devices = self._devices
        planned = []
        # Every attempt has a pod at least: no more of them can start in this cycle.
        attempts = list(attempts[: max(self._creations_left, 0)])
        of_attempt = {}
        for chunk in range(0, len(attempts), 1000):
            for ta in TaskAttempt.objects.filter(
                task__job_attempt__in=[attempt.pk for attempt in attempts[chunk:chunk + 1000]]
            ).select_related("task").order_by("task__task_role", "task__index"):
                of_attempt.setdefault(ta.task.job_attempt_id, []).append((ta, ta.task))
        for attempt in attempts:
            if self._creations_left <= 0:
                break  # a bounded cycle: the next one goes on (a gang's pods are not split)
            job = attempt.job
            pairs = of_attempt.get(attempt.pk, [])
            try:
                specs = launch.pod_specs(job, attempt.index, pairs, job.placement, node_ips, devices)
            except NOT_ONE_JOBS_FAILURE:
                raise
            except Exception as exc:
                self._begin_deletions([self._unprocessable(attempt, "build its pods", exc)])
                continue
            todo = []
            for (ta, _task), spec in zip(pairs, specs):
                # A pod with secrets that has not started is asked for again while its
                # attempt is created, even once its UID is known: a backend that makes the
                # secrets after the pod (Kubernetes) so finishes a creation that a crash or
                # a failed call cut short.
                if ta.completed_at or (ta.pod_uid and (ta.started_at or not spec.secrets)):
                    continue
                self._creations_left -= 1
                todo.append((ta, spec))
            planned.append((attempt, todo))
        created = self._create_pods([item for _attempt, todo in planned for item in todo])
        prepared = [attempt for attempt, todo in planned if all(created[ta.pk] for ta, _spec in todo)]
        self._set_sub_states(prepared, JobSubState.ATTEMPT_PREPARING)

    def _create_pods(self, todo):
        """Create the pods of [(task attempt, spec)], PAI_KUBE_CONCURRENCY at a time: {task
        attempt pk: False when a transient error leaves it for the next cycle}."""
        created, failure = {}, None
        # The first pod of each namespace alone, on this thread: the backend makes sure of the
        # namespace then (its quota is read from the database, which only this thread uses).
        first, seen = [], set()
        for item in todo:
            if item[1].namespace not in seen:
                seen.add(item[1].namespace)
                first.append(item)
        rest = [item for item in todo if item not in first]
        for chunk in [[item] for item in first] + self._chunks(rest):
            for _item in chunk:
                self._guard()  # on this thread: every write counts towards the lease's checks
            outcomes = self._in_parallel(lambda item: self.backend.create_pod(item[1]), chunk)
            made = []
            for (ta, spec), (observation, error) in zip(chunk, outcomes):
                if error is not None and not isinstance(error, (TransientCreationError, PermanentCreationError)):
                    failure = failure or error  # raised once what did succeed is recorded
                    created[ta.pk] = False
                    continue
                created[ta.pk] = self._created(ta, spec, observation, error)
                if error is None and ta.pod_uid == observation.uid:
                    made.append(ta)
            bulk_set(TaskAttempt, made, ["pod_uid"])
            for _ta in made:
                failpoint("after-pod-created")
            if failure is not None:
                raise failure
        return created

    def _created(self, ta, spec, observation, error):
        """Record a creation's outcome (the pod's UID is left to the caller to write)."""
        try:
            if error is not None:
                raise error
        except TransientCreationError as exc:
            failures = ta.diagnostics.count("creation failed") + 1
            if failures >= CREATION_ATTEMPTS:
                self._complete_task_attempt(ta, exitcodes.POD_CREATION_TRANSIENT_ERROR, str(exc))
            else:
                TaskAttempt.objects.filter(pk=ta.pk).update(
                    diagnostics=f"{ta.diagnostics}\ncreation failed: {exc}".strip()
                )
            return False
        except PermanentCreationError as exc:
            self._complete_task_attempt(ta, exitcodes.POD_CREATION_PERMANENT_ERROR, str(exc))
            return True
        if ta.pod_uid and observation.uid != ta.pod_uid:
            # The pod we knew went meanwhile (its end is observed); this new one is not the task attempt's.
            self._delete_pod(spec.name, observation.uid)
            return True
        ta.pod_uid = observation.uid
        self._live.add(spec.name)
        if not ta.started_at:
            self._waiting[spec.name] = observation.uid
        return True

    def create_retried_pods(self, full=True):
        """Pods of the tasks retried on their own (gang allocation off) in attempts that run.

        Their task attempts are written when the previous one ends; this creates their pods,
        with the environment of the attempt's current tasks. A full pass looks in the
        database (crash repair); otherwise only at the attempts that retried a task.
        """
        pending = TaskAttempt.objects.filter(
            task__job_attempt__job__virtual_cluster__cluster=self.cluster,
            task__job_attempt__sub_state__in=(JobSubState.ATTEMPT_PREPARING, JobSubState.ATTEMPT_RUNNING),
            index__gt=0, pod_uid="", completed_at__isnull=True,
        )
        if not full:
            if not self._retried:
                return
            pending = pending.filter(task__job_attempt__in=list(self._retried))
        self._retried = set()
        attempt_ids = set(pending.values_list("task__job_attempt_id", flat=True))
        if not attempt_ids:
            return
        node_ips = self._node_ips()
        devices = self._devices
        attempts = JobAttempt.objects.filter(pk__in=attempt_ids).select_related(
            "job__owner", "job__virtual_cluster", "job__tenant"
        )
        for attempt in attempts.order_by("job_id"):
            if self._creations_left <= 0:
                self._retried.add(attempt.pk)  # a bounded cycle: the next one goes on
                continue
            current = {}
            for ta in TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task").order_by(
                "task__task_role", "task__index", "index"
            ):
                current[ta.task_id] = ta  # the latest of each task
            pairs = [(ta, ta.task) for ta in current.values()]
            specs = launch.pod_specs(attempt.job, attempt.index, pairs, attempt.job.placement, node_ips, devices)
            for (ta, _task), spec in zip(pairs, specs):
                if ta.index > 0 and not ta.pod_uid and not ta.completed_at:
                    self._creations_left -= 1
                    if not self._create_pods([(ta, spec)])[ta.pk]:
                        self._retried.add(attempt.pk)  # a transient error: again next cycle
