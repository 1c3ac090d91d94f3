"""The cluster backend interface: what the worker needs from whatever runs pods.

A backend hides *how* a placed pod runs (a Kubernetes pod, a local subprocess). The
scheduling engine decides where pods go; the reconciler (in the Django worker) decides
which pods should exist; a backend only carries those decisions out and reports what
actually happens. Everything here is plain data: no Django, no ORM.

Contract every backend keeps
----------------------------
- **One pod per name.** Pod names are deterministic per task attempt (see
  :func:`pod_name`). ``create_pod`` is idempotent: creating a name that already exists
  (and is not deleted) returns the existing pod's observation and never starts a second
  one, even if the given spec differs; the existing pod wins. Callers record the
  returned ``uid``: the recorded UID is the identity of the pod from then on.
- **Deletion with a precondition.** ``delete_pod(name, uid=...)`` refuses
  (:class:`PodConflictError`) when a pod of that name exists with another UID, so a
  stale delete can never kill a newer incarnation. Deleting a name that does not exist
  is not an error (``False`` is returned). A running pod gets SIGTERM, then SIGKILL
  after ``grace_seconds``; it keeps being listed (with ``deletion_requested``) until its
  processes are gone, then it is reported once more by :meth:`ClusterBackend.poll` with
  ``deleted=True`` and disappears from :meth:`ClusterBackend.list_pods`.
- **Observations are the truth about the cluster**, not about intent. A pod's terminal
  observation (``Succeeded``/``Failed``) carries its exit code as Kubernetes reports it:
  the container's exit status, or ``128 + N`` for a process killed by signal ``N``
  (137 for SIGKILL, 143 for SIGTERM), plus ``signal`` when known.
- **Vanished pods.** A pod the backend knew that is gone without a recorded exit (its
  node or process disappeared, someone else deleted it, the worker lost track of it) is
  reported as ``Failed`` with ``reason="NodeLost"`` (or, on Kubernetes, simply as
  ``deleted=True`` without a terminal phase). The reconciler treats both as a transient
  failure (exit spec −1001 / −101), never as success.
- **Change feed.** ``poll(since)`` returns every observation whose state changed after
  the cursor ``since``, in order; pass the ``resource_version`` of the last observation
  you processed as the next ``since``. ``poll(None)`` is a full relist of the live pods
  (no deletions): use it at start-up and whenever a cursor is rejected
  (:class:`CursorExpiredError`, Kubernetes' ``410 Gone``), taking ``cursor()`` just
  before it to resume from. A terminal state is reported at least once after it
  happens; consumers must be idempotent (the same observation may be seen again after
  a relist). Backends that cannot push changes (local) look at their pods when
  ``poll``/``list_pods`` is called: call ``poll`` periodically.
- A pod deleted before its task started ends ``Failed`` without an exit code.
  :func:`scheduler.lifecycle.task_exit` turns a terminal or vanished observation into
  the task attempt's completion code and exit spec row.
- Backends are used from one thread at a time; ``close()`` releases connections but
  never stops pods: pods outlive the worker process.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})

LABEL_JOB = "pai.job"
LABEL_TASK_ROLE = "pai.taskrole"
LABEL_TASK_INDEX = "pai.task-index"
LABEL_ATTEMPT = "pai.attempt"
LABEL_TASK_ATTEMPT = "pai.task-attempt"
ANNOTATION_PLACEMENT = "pai.placement"
# A task finds its secrets as one file per key in the directory this variable names:
# SECRETS_MOUNT_PATH (OpenPAI's path) in a container, a directory of its own elsewhere.
SECRETS_DIR_ENV = "PAI_SECRETS_DIR"
SECRETS_MOUNT_PATH = "/usr/local/pai/secrets"

# Pod reasons the backends report (``PodObservation.reason``); the exit spec matches them.
REASON_NODE_LOST = "NodeLost"
REASON_EVICTED = "Evicted"
REASON_PREEMPTED = "Preempted"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_OOM_KILLED = "OOMKilled"
REASON_ERR_IMAGE_PULL = "ErrImagePull"


class BackendError(Exception):
    """Base class of the errors a backend raises."""


class PodCreationError(BackendError):
    """A pod could not be created. Use a subclass."""


class TransientCreationError(PodCreationError):
    """Creation failed for a reason that may go away (API unavailable, quota exceeded,
    out of processes). The reconciler retries: exit spec −120."""


class PermanentCreationError(PodCreationError):
    """The spec can never be created (invalid name, unknown node, devices the node does
    not have, no commands). Exit spec −200, no retry."""


class PodConflictError(BackendError):
    """A delete's UID precondition failed: the pod of that name is another incarnation."""


class PodNotFoundError(BackendError, LookupError):
    """No pod (nor log) of that name."""


class CursorExpiredError(BackendError):
    """``poll(since)`` cannot resume from that cursor; relist with ``poll(None)``."""


class ClusterUnavailableError(BackendError):
    """The cluster's API could not be reached (after the backend's own retries), or the
    backend stopped calling it for a while (:meth:`ClusterBackend.availability`). The
    call did nothing that a later repeat would not finish: the worker pauses the
    cluster and tries again later, without counting it against any pod."""


@dataclass(frozen=True)
class Availability:
    """Whether the cluster's API answers. ``retry_in``: seconds before the backend calls
    it again (0 when it may be called now, as a probe when not ``available``); ``since``:
    when it stopped answering (epoch seconds)."""

    available: bool = True
    reason: str = ""
    since: float | None = None
    retry_in: float = 0.0


@dataclass(frozen=True)
class NodeInfo:
    """A node as the backend sees it. ``gpu`` is the device count (device indices are
    0..gpu-1, the indices placements use); ``ready`` is health, ``schedulable`` is
    whether new pods may go there (not cordoned, no taint pai does not tolerate).
    ``*_used_by_others``: what pods pai does not manage request on the node (devices,
    CPU, memory), which pai's pods cannot have."""

    name: str
    ip: str
    gpu: int
    cpu: float
    memory_mb: int
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = True
    schedulable: bool = True
    gpu_used_by_others: int = 0
    cpu_used_by_others: float = 0.0
    memory_mb_used_by_others: int = 0


@dataclass(frozen=True)
class StorageMount:
    """A storage the pod sees at ``mount_path``.

    ``claim`` is the PersistentVolumeClaim on Kubernetes. ``host_path`` is set for
    host-path storages (the real directory on the node); the local backend maps it
    directly, and maps every other storage to a directory of its own state (see
    :mod:`scheduler.backends.local`)."""

    name: str
    claim: str
    mount_path: str
    sub_path: str = ""
    read_only: bool = False
    host_path: str | None = None


@dataclass(frozen=True)
class PortRequest:
    """Host ports a pod uses, by OpenPAI port label (``ports: {http: 2}``)."""

    label: str
    ports: tuple[int, ...]


@dataclass(frozen=True)
class ImagePullAuth:
    username: str
    password: str
    registry: str = ""


@dataclass(frozen=True)
class PodSpec:
    """Everything needed to run one task attempt on its placed node.

    ``commands`` is the task's shell script (the task role's commands joined by
    newlines, deployment pre/post commands included); it runs under ``bash -c`` on the
    local backend and as the container command on Kubernetes. ``env`` is complete as
    given (``PAI_*`` from :mod:`scheduler.podenv` and anything else); the backend adds
    only ``CUDA_VISIBLE_DEVICES`` (local) or device plumbing (Kubernetes).
    ``devices`` are the node's device indices the placement chose (the host's indices: on
    a host carrying several SKUs, each SKU holds its own range). ``device_resource`` is
    the extended resource one device of the pod's SKU is (empty: the backend's default);
    ``devices_by_index``: the pod must get exactly ``devices`` (its host carries several
    SKUs counted as one resource, so a device plugin could hand out another SKU's
    devices). ``secrets`` are the
    job's secrets as files, key → text: the backend puts each where only the task reads
    it and sets ``PAI_SECRETS_DIR`` to their directory (see :func:`is_valid_secret_key`
    for the keys it accepts). They stay out of the repr, so a logged spec shows none.
    """

    name: str
    node: str
    commands: str
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    devices: tuple[int, ...] = ()
    image: str = ""
    image_pull_auth: ImagePullAuth | None = None
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = ""
    storage_mounts: tuple[StorageMount, ...] = ()
    ports: tuple[PortRequest, ...] = ()
    shm_mb: int = 512
    cpu: float = 0.0
    memory_mb: int = 0
    gpu: int = 0
    device_resource: str = ""
    devices_by_index: bool = False
    priority_class: str = ""
    grace_seconds: float = 30.0
    secrets: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class PodObservation:
    """What a backend saw of a pod at ``resource_version``.

    ``reason`` is the pod-level reason (``Evicted``, ``NodeLost``, ``Preempted``,
    ``DeadlineExceeded``, ``OutOf<resource>``, ``UnexpectedAdmissionError``) and
    ``container_reason`` the container-level one (``OOMKilled``, ``ErrImagePull``,
    ``ImagePullBackOff``, ``Error``, ``Completed``); feed both to
    :func:`scheduler.exitcodes.classify`. ``exit_code`` is set in terminal phases when
    the container ran to an exit; ``signal`` when it was killed by a signal.
    ``deletion_requested`` is Kubernetes' deletionTimestamp; ``deleted`` marks the last
    observation of a pod that no longer exists.
    """

    name: str
    uid: str
    phase: PodPhase
    resource_version: str
    node: str = ""
    ip: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    container_reason: str = ""
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    deletion_requested: bool = False
    deleted: bool = False

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


@dataclass(frozen=True)
class PodEvent:
    """A Kubernetes-style event about a pod (``Scheduled``, ``Started``, ``Killing``,
    ``Completed``, ``Failed``, ``NodeLost``), for the job's events page."""

    pod_name: str
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    at: datetime
    count: int = 1


LogStream = Literal["all", "stdout", "stderr"]


class ClusterBackend(ABC):
    """What runs pods. See the module docstring for the contract."""

    #: Whether ``read_log`` still answers once the pod is deleted (until ``forget_pod``).
    #: Kubernetes forgets a deleted pod's log at once: the worker keeps its end itself.
    logs_outlive_pods: bool = False

    @abstractmethod
    def list_nodes(self) -> list[NodeInfo]:
        """Every node with capacity, labels and health, sorted by name."""

    @abstractmethod
    def create_pod(self, spec: PodSpec) -> PodObservation:
        """Create the pod, or return the existing live pod of that name.

        Raises :class:`TransientCreationError` or :class:`PermanentCreationError`.
        """

    @abstractmethod
    def delete_pod(self, name: str, uid: str | None = None, grace_seconds: float | None = None) -> bool:
        """Ask the pod to stop (SIGTERM, SIGKILL after the grace period; the spec's
        ``grace_seconds`` when ``None``) and remove it once stopped.

        Returns whether a pod of that name existed. With ``uid``, raises
        :class:`PodConflictError` if the existing pod has another UID.
        """

    @abstractmethod
    def list_pods(self, selector: dict[str, str] | None = None) -> list[PodObservation]:
        """The live (not yet deleted) pods whose labels include all of ``selector``,
        sorted by name, with their current state."""

    @abstractmethod
    def poll(self, since: str | None = None) -> list[PodObservation]:
        """Observations changed after cursor ``since`` in change order (``None``: all
        live pods). Raises :class:`CursorExpiredError` when ``since`` is too old."""

    @abstractmethod
    def cursor(self) -> str:
        """The current position of the change feed: ``poll(cursor())`` returns only
        changes made after this call."""

    @abstractmethod
    def read_log(self, name: str, tail_lines: int | None = None, stream: LogStream = "all") -> str:
        """The pod's output (``all``: stdout and stderr interleaved as written), the last
        ``tail_lines`` lines only when given. Raises :class:`PodNotFoundError` when the
        backend has no log for ``name``."""

    @abstractmethod
    def read_events(self, name: str) -> list[PodEvent]:
        """The events recorded for the pod, oldest first (empty when unknown)."""

    @abstractmethod
    def forget_pod(self, name: str) -> None:
        """Drop what the backend still keeps of a deleted pod (logs, records, events):
        for retention. Raises :class:`PodConflictError` if the pod is not deleted yet."""

    def availability(self) -> Availability:
        """Whether the cluster's API answers (a local backend always does)."""
        return Availability()

    def close(self) -> None:
        """Release connections and handles. Pods keep running."""


_DNS_LABEL_CHARS = re.compile(r"[^a-z0-9-]+")
POD_NAME_MAX = 63
_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def is_valid_pod_name(name: str) -> bool:
    """A DNS label (≤ 63 chars), valid as a Kubernetes pod name, label value and a
    directory name."""
    return len(name) <= POD_NAME_MAX and bool(_POD_NAME.match(name))


# A Kubernetes Secret's data key (a config map key), which is also a plain file name: 1 to
# 253 letters, digits, ``-``, ``_`` or ``.``, neither ``.`` nor starting with ``..``
# (Kubernetes keeps its own ``..data`` entries beside the files). Written for JSON Schema
# too (the job protocol checks names with it); ``(?!\n)``: ``$`` also matches before a
# final newline.
SECRET_KEY_PATTERN = r"^(?!\.\.)(?!\.$)[-._a-zA-Z0-9]{1,253}(?!\n)$"
# What one Kubernetes Secret holds at most (the sum of its values), so a pod's secrets.
MAX_SECRETS_BYTES = 1024 * 1024
_SECRET_KEY = re.compile(SECRET_KEY_PATTERN)


def is_valid_secret_key(key: str) -> bool:
    """Whether ``key`` can be a secret file's name in every backend (``SECRET_KEY_PATTERN``)."""
    return bool(_SECRET_KEY.match(key))


def pod_name(job_key: str, task_role: str, task_index: int, attempt: int, task_attempt: int) -> str:
    """The deterministic pod name of one task attempt.

    ``job_key`` identifies the job uniquely and forever (the job's id or UUID, not its
    user-chosen name). Task role names may hold capitals and ``_``, which pod names
    cannot; when sanitising changed the name, or the result would be too long, a short
    hash of the exact inputs keeps names distinct (``Worker`` and ``worker`` differ).
    """
    suffix = f"{task_index}-{attempt}-{task_attempt}"
    job = _DNS_LABEL_CHARS.sub("-", job_key.lower()).strip("-") or "job"
    role = _DNS_LABEL_CHARS.sub("-", task_role.lower()).strip("-") or "role"
    name = f"{job}-{role}-{suffix}"
    if role == task_role and job == job_key and len(name) <= POD_NAME_MAX:
        return name
    digest = hashlib.sha256(f"{job_key}\0{task_role}".encode()).hexdigest()[:8]
    room = POD_NAME_MAX - len(suffix) - len(digest) - 3
    head = f"{job}-{role}"[:room].rstrip("-")
    return f"{head}-{digest}-{suffix}"


def pod_labels(job_key: str, task_role: str, task_index: int, attempt: int, task_attempt: int) -> dict[str, str]:
    """The standard labels of a pod; select a job's pods with ``{LABEL_JOB: job_key}``."""
    return {
        LABEL_JOB: job_key,
        LABEL_TASK_ROLE: task_role,
        LABEL_TASK_INDEX: str(task_index),
        LABEL_ATTEMPT: str(attempt),
        LABEL_TASK_ATTEMPT: str(task_attempt),
    }
