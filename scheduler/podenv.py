"""OpenPAI's task environment (``PAI_*``) and host-port allocation.

:func:`task_environment` builds the variables OpenPAI's rest-server gave every task,
with the same names and value formats, so existing job scripts run unchanged:

- ``PAI_JOB_NAME`` is ``<user>~<job name>`` (OpenPAI's framework name), ``PAI_USER_NAME``,
  ``PAI_VIRTUAL_CLUSTER``;
- ``PAI_TASK_ROLE_COUNT``, ``PAI_TASK_ROLE_LIST`` (comma-separated, in the job's order),
  per task role ``PAI_TASK_ROLE_TASK_COUNT_<tr>``, ``PAI_RESOURCE_<tr>``
  (``"<gpu>,<cpu>,<memoryMB>,<shmMB>"``), ``PAI_MIN_FAILED_TASK_COUNT_<tr>`` (default 1)
  and ``PAI_MIN_SUCCEEDED_TASK_COUNT_<tr>`` (default -1, as OpenPAI wrote it: the
  scheduler itself uses "all instances");
- per task ``PAI_HOST_IP_<tr>_<i>`` and ``PAI_PORT_LIST_<tr>_<i>_<label>`` (ports
  comma-separated);
- for the task itself ``PAI_CURRENT_TASK_ROLE_NAME``,
  ``PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX``;
- and OpenPAI's older aliases (``PAI_TASK_INDEX``, ``PAI_USERNAME``,
  ``PAI_FRAMEWORK_NAME``, ``PAI_JOB_TASK_COUNT``, ``PAI_TASKS_NUM``,
  ``PAI_JOB_TASK_ROLE_COUNT``, ``PAI_TASK_ROLES_NUM``, ``PAI_JOB_TASK_ROLE_LIST``,
  ``PAI_DEFAULT_FS_URI``) that old job files still read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# OpenPAI reserved one port of each of these labels for every task, asked for or not
# (the ssh plugin and the web terminal rely on them).
DEFAULT_PORT_LABELS = ("ssh", "http")
DEFAULT_SHM_MB = 512


@dataclass(frozen=True)
class TaskRoleInfo:
    """What the environment needs of a task role (from the parsed job protocol)."""

    name: str
    instances: int
    gpu: int = 0
    cpu: float = 1
    memory_mb: int = 0
    shm_mb: int = DEFAULT_SHM_MB
    min_failed_instances: int | None = None
    min_succeeded_instances: int | None = None


@dataclass(frozen=True)
class JobInfo:
    name: str
    user: str
    virtual_cluster: str
    task_roles: tuple[TaskRoleInfo, ...]


@dataclass(frozen=True)
class TaskAddress:
    """Where one task runs: its node's IP and its host ports by label."""

    task_role: str
    index: int
    host_ip: str
    ports: Mapping[str, Sequence[int]] = field(default_factory=dict)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def job_environment(job: JobInfo, addresses: Iterable[TaskAddress]) -> dict[str, str]:
    """The variables every task of the job gets (the same for all of them)."""
    names = [tr.name for tr in job.task_roles]
    total = sum(tr.instances for tr in job.task_roles)
    framework = f"{job.user}~{job.name}"
    env = {
        "PAI_JOB_NAME": framework,
        "PAI_FRAMEWORK_NAME": framework,
        "PAI_USER_NAME": job.user,
        "PAI_USERNAME": job.user,
        "PAI_VIRTUAL_CLUSTER": job.virtual_cluster,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_TASK_ROLE_COUNT": str(len(names)),
        "PAI_JOB_TASK_ROLE_COUNT": str(len(names)),
        "PAI_TASK_ROLES_NUM": str(len(names)),
        "PAI_TASK_ROLE_LIST": ",".join(names),
        "PAI_JOB_TASK_ROLE_LIST": ",".join(names),
        "PAI_JOB_TASK_COUNT": str(total),
        "PAI_TASKS_NUM": str(total),
    }
    for tr in job.task_roles:
        env[f"PAI_TASK_ROLE_TASK_COUNT_{tr.name}"] = str(tr.instances)
        env[f"PAI_RESOURCE_{tr.name}"] = ",".join(_number(v) for v in (tr.gpu, tr.cpu, tr.memory_mb, tr.shm_mb))
        # OpenPAI treats 0 and null alike (unset).
        env[f"PAI_MIN_FAILED_TASK_COUNT_{tr.name}"] = str(tr.min_failed_instances or 1)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{tr.name}"] = str(tr.min_succeeded_instances or -1)
    for address in sorted(addresses, key=lambda a: (names.index(a.task_role), a.index)):
        key = f"{address.task_role}_{address.index}"
        env[f"PAI_HOST_IP_{key}"] = address.host_ip
        for label in sorted(address.ports):
            env[f"PAI_PORT_LIST_{key}_{label}"] = ",".join(str(p) for p in address.ports[label])
    return env


def task_environment(job: JobInfo, addresses: Iterable[TaskAddress], task_role: str, index: int) -> dict[str, str]:
    """The full ``PAI_*`` environment of task ``index`` of ``task_role``.

    ``addresses`` must cover every task of the job (a gang is placed whole), so each task
    can reach the others. Raises ``ValueError`` naming what is missing.
    """
    roles = {tr.name: tr for tr in job.task_roles}
    if task_role not in roles:
        raise ValueError(f"taskRoles.{task_role}: not a task role of job {job.name}")
    if not 0 <= index < roles[task_role].instances:
        raise ValueError(f"taskRoles.{task_role}: no task {index} (instances: {roles[task_role].instances})")
    return task_environments(job, addresses)[(task_role, index)]


def task_environments(job: JobInfo, addresses: Iterable[TaskAddress]) -> dict[tuple[str, int], dict[str, str]]:
    """:func:`task_environment` of every task of the job, {(task role, index): environment}:
    the job-wide part is built once, not once per task (which made a gang of n pods cost n²)."""
    addresses = list(addresses)
    placed = {(a.task_role, a.index) for a in addresses}
    for tr in job.task_roles:
        for i in range(tr.instances):
            if (tr.name, i) not in placed:
                raise ValueError(f"taskRoles.{tr.name}: task {i} has no address")
    shared = job_environment(job, addresses)
    environments = {}
    for tr in job.task_roles:
        for i in range(tr.instances):
            env = dict(shared)
            env["PAI_CURRENT_TASK_ROLE_NAME"] = tr.name
            env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] = str(i)
            env["PAI_TASK_INDEX"] = str(i)
            environments[(tr.name, i)] = env
    return environments


def requested_ports(ports: Mapping[str, int] | None) -> dict[str, int]:
    """A task role's ``resourcePerInstance.ports`` plus OpenPAI's default labels."""
    result = {label: int(count) for label, count in (ports or {}).items()}
    for label in DEFAULT_PORT_LABELS:
        result.setdefault(label, 1)
    return result


class PortsExhaustedError(ValueError):
    """Not enough free ports on a host: ``wanted`` asked, ``free`` left of the ``total`` it has."""

    def __init__(self, host: str, wanted: int, free: int, total: int) -> None:
        self.host, self.wanted, self.free, self.total = host, wanted, free, total
        super().__init__(f"{host}: {wanted} ports wanted, {free} free")


class PortAllocator:
    """Host ports for tasks, deterministic and collision-free per host.

    Hosts are keyed by IP, not node name: the local backend's virtual nodes all share
    this machine's network. A task's ports start at a point derived from its ``key``
    (e.g. the pod name), so the same request on the same state gives the same ports,
    and continue upwards (wrapping) over ports not already taken. Rebuild an allocator
    after a restart with :meth:`reserve` for the ports of the pods that still run.
    """

    def __init__(self, first: int = 20000, last: int = 39999) -> None:
        if not 0 < first <= last < 65536:
            raise ValueError("ports: need 0 < first ≤ last < 65536")
        self.first = first
        self.last = last
        self._taken: dict[str, set[int]] = {}

    def reserve(self, host: str, ports: Iterable[int]) -> None:
        self._taken.setdefault(host, set()).update(ports)

    def release(self, host: str, ports: Iterable[int]) -> None:
        self._taken.get(host, set()).difference_update(ports)

    def taken(self, host: str) -> frozenset[int]:
        return frozenset(self._taken.get(host, ()))

    @property
    def total(self) -> int:
        """How many ports each host offers."""
        return self.last - self.first + 1

    def free(self, host: str) -> int:
        return self.total - len(self._taken.get(host, ()))

    def check(self, host: str, wanted: int) -> None:
        """PortsExhaustedError unless ``wanted`` ports are free on ``host``."""
        if wanted > self.free(host):
            raise PortsExhaustedError(host, wanted, self.free(host), self.total)

    def allocate(self, host: str, key: str, counts: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Reserve ``counts[label]`` ports per label on ``host`` for ``key``; labels are
        served in sorted order from consecutive free ports."""
        wanted = sum(counts.values())
        if any(c < 0 for c in counts.values()):
            raise ValueError("ports: counts must be ≥ 0")
        self.check(host, wanted)
        span = self.total
        taken = self._taken.setdefault(host, set())
        start = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % span
        free: list[int] = []
        offset = 0
        while len(free) < wanted:
            port = self.first + (start + offset) % span
            if port not in taken:
                free.append(port)
            offset += 1
        taken.update(free)
        result, cursor = {}, 0
        for label in sorted(counts):
            result[label] = tuple(free[cursor : cursor + counts[label]])
            cursor += counts[label]
        return result
