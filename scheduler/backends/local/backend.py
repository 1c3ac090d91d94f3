"""The local backend: virtual nodes on this machine, each pod a real subprocess.

Layout of ``state_dir``::

    resource_version        the change counter (poll cursors are its values)
    lock                    flock'd around every change, so two worker processes
                            over one state dir never race
    pods/<name>/pod.json    the backend's record: uid, node, labels, observed state
    pods/<name>/launch.json what the supervisor runs (script, env, cwd, grace)
    pods/<name>/process.json, exit.json, deletion.json, *.log   see ``shim.py``
    pods/<name>/events.jsonl
    pods/<name>/work/       the task's working directory
    pods/<name>/secrets/    the task's secret files, while it runs
    pods/<name>/passwd, group  the sandbox's /etc/passwd and /etc/group
    storage/<claim>/        non-host-path storages

Each pod runs under a small supervisor process (``shim.py``) in a session of its own:
it outlives the worker, records the task's exit status in ``exit.json`` and carries out
stops. A new :class:`LocalBackend` over the same ``state_dir`` therefore adopts the
running pods of a previous one: it trusts a recorded process only if its pid, its start
time (``/proc/<pid>/stat``) and the boot id all match, so a recycled pid is never
adopted, and it reports a supervisor that is gone without an ``exit.json`` as
``Failed``/``NodeLost`` (and kills the task it left behind, if it still runs). A pod is
never started twice: the record is written before the supervisor is spawned, and
``create_pod`` on an existing record returns it.

Isolation (:mod:`.sandbox`): where the sandbox can be had (root, Linux namespaces,
bubblewrap), each task runs in a bubblewrap sandbox as its tenant's own uid (the pod's
namespace is the tenant) and sees only the system read-only, its working directory, its
secrets and its storages; this state directory, other pods and pai's data directory do
not exist for it. Where it cannot, the backend runs tasks as the worker's user and runs
the tasks of one tenant only (the first one's, recorded in the registry directory):
another tenant's pod is a permanent creation error saying why. The backend logs which
of the two it does when it starts. ``Isolation(mode=...)`` chooses: ``auto`` (the
above), ``required``, ``single-tenant``, ``off`` (no isolation at all).

Storage: a storage is a real directory: a host-path storage its ``host_path`` (the
directory itself: launch folds the storage's sub-path in), every other one
``storage/<claim>/<sub_path>`` under the state dir. In the sandbox it is mounted at its
mount path (``/mnt/data``), read-only where the storage is; a directory the backend
creates for it belongs to the tenant's uid. Without the sandbox a process cannot see a
directory at ``/mnt/data`` (that needs root and a mount namespace, and ``/mnt/...`` on
the host would make pods of different users collide) and read-only is not enforced.
Either way the task finds them through its environment: ``PAI_STORAGE_<NAME>`` (the
storage name in capitals, ``-`` as ``_``) is the directory as the task sees it and
``PAI_STORAGE_MOUNTS`` a JSON object ``{mount path: that directory}``.

The task's environment is the spec's ``env`` plus ``CUDA_VISIBLE_DEVICES`` (the node's
real GPU ids for the placed devices, or the device indices on virtual GPUs; empty when
none) and only ``PATH``, ``HOME``, ``LANG``, ``LC_ALL``, ``TZ``, ``USER``, ``LOGNAME``
from the worker, never its secrets; in the sandbox ``HOME`` is the working directory
and ``USER``/``LOGNAME`` the tenant's user. It always runs in ``work/``: the spec's
``working_dir`` is a path inside a container image and has no meaning here. Image, pull
credentials, CPU/memory limits and ports are not enforced (ports only reach the task
through its ``PAI_PORT_LIST_*`` variables); in the sandbox ``/dev/shm`` holds
``shm_mb``. Output is kept per stream and once interleaved (``all.log``), so logs take
twice their size on disk. Linux only (``/proc``).

Secrets: the spec's ``secrets`` are files in ``secrets/`` (the directory mode 0700, each
file 0600, owned by the task's user; read-only in the sandbox), written before the task
starts; ``PAI_SECRETS_DIR`` names the directory. They are removed as soon as the task
has ended, so at the latest when the pod is deleted. Without the sandbox the modes keep
other users out, not other pods: every task then runs as the worker's user.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from ..base import (
    REASON_NODE_LOST,
    SECRETS_DIR_ENV,
    TERMINAL_PHASES,
    ClusterBackend,
    CursorExpiredError,
    LogStream,
    NodeInfo,
    PermanentCreationError,
    PodConflictError,
    PodEvent,
    PodNotFoundError,
    PodObservation,
    PodSpec,
    TransientCreationError,
    is_valid_pod_name,
    is_valid_secret_key,
)
from . import sandbox, shim
from .sandbox import Bind, Isolation, TaskUser, TenantRegistry

SHIM_PATH = Path(shim.__file__).resolve()
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME")
# How long a spawned supervisor may take to record its task before the pod counts as lost.
DEFAULT_STARTUP_TIMEOUT = 15.0
# How long past a stop's grace period the backend waits for the supervisor to have killed
# the task before it kills the task's process group itself.
KILL_MARGIN_SECONDS = 5.0
_ENV_NAME = re.compile(r"[^A-Z0-9_]")
logger = logging.getLogger(__name__)
# What this process already told about isolation, by state directory: said once at start.
_announced: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class LocalNode:
    """A virtual node. ``gpu_ids`` are the real GPU ids behind device indices 0..gpu-1
    (``CUDA_VISIBLE_DEVICES`` values); empty for virtual GPUs, which expose the device
    indices themselves."""

    name: str
    gpu: int = 0
    cpu: float = 1.0
    memory_mb: int = 1024
    ip: str = "127.0.0.1"
    labels: dict[str, str] = field(default_factory=dict)
    gpu_ids: tuple[str, ...] = ()
    ready: bool = True
    schedulable: bool = True

    @classmethod
    def from_config(cls, item: Mapping[str, Any]) -> LocalNode:
        """A node from a configuration mapping: ``name``, ``gpu``, ``cpu``,
        ``memory_mb`` (or ``memory``, in MB), ``ip``, ``labels``, ``gpu_ids``,
        ``ready``, ``schedulable``. Raises ``ValueError`` naming the bad field."""
        known = {"name", "gpu", "cpu", "memory_mb", "memory", "ip", "labels", "gpu_ids", "ready", "schedulable"}
        unknown = sorted(set(item) - known)
        if unknown:
            raise ValueError(f"nodes: unknown field {unknown[0]!r}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("nodes[].name: required")
        gpu = int(item.get("gpu", 0))
        if gpu < 0:
            raise ValueError(f"nodes.{name}.gpu: must be ≥ 0")
        gpu_ids = tuple(str(g) for g in item.get("gpu_ids", ()))
        if gpu_ids and len(gpu_ids) != gpu:
            raise ValueError(f"nodes.{name}.gpu_ids: needs one id per GPU ({gpu})")
        return cls(
            name=name,
            gpu=gpu,
            cpu=float(item.get("cpu", 1.0)),
            memory_mb=int(item.get("memory_mb", item.get("memory", 1024))),
            ip=str(item.get("ip", "127.0.0.1")),
            labels={str(k): str(v) for k, v in (item.get("labels") or {}).items()},
            gpu_ids=gpu_ids,
            ready=bool(item.get("ready", True)),
            schedulable=bool(item.get("schedulable", True)),
        )

    def visible_devices(self, devices: Iterable[int]) -> str:
        return ",".join(self.gpu_ids[d] if self.gpu_ids else str(d) for d in devices)


def _now() -> float:
    return time.time()


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in ticks) of a process, or ``None`` if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


@cache
def _boot_id() -> str:
    return shim.boot_id()


def _is_same_process(pid: int | None, start: int | None, boot: str | None) -> bool:
    """Whether ``pid`` is still the process that was recorded (not a recycled pid, not a
    zombie, same boot)."""
    if pid is None or start is None or boot != _boot_id():
        return False
    state = _proc_state(pid)
    return state is not None and state[1] == start and state[0] not in ("Z", "X")


def _file_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, st.st_size


def _spec_digest(spec: PodSpec) -> str:
    """A digest of the spec with its secrets' names only: the record keeps no trace of their values."""
    data = asdict(spec)
    data["secrets"] = sorted(spec.secrets)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _write_secrets(directory: Path, secrets: Mapping[str, str], user: TaskUser | None) -> Path:
    """One file per secret, readable by the task's user alone (whatever the umask)."""
    directory.mkdir(mode=0o700)
    directory.chmod(0o700)
    for key, value in secrets.items():
        fd = os.open(directory / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(fd, "wb") as f:
            os.fchmod(fd, 0o600)
            if user is not None:
                os.fchown(fd, user.uid, user.gid)
            f.write(value.encode())
    if user is not None:
        os.chown(directory, user.uid, user.gid)
    return directory


def _tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a file, reading backwards in blocks."""
    if lines <= 0:
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        pos = end
        data = b""
        # One more newline than lines wanted, unless the file ends without one.
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    text = data.decode("utf-8", errors="replace")
    parts = text.splitlines(keepends=True)
    return "".join(parts[-lines:])


class LocalBackend(ClusterBackend):
    """Pods as subprocesses on this machine, over virtual ``nodes``.

    A pod's log files stay after it is deleted, until ``forget_pod`` (``logs_outlive_pods``).

    ``state_dir`` holds everything (see the module docstring); give a new instance the
    same directory after a restart. ``shell`` runs the task's commands (``-c``);
    ``python`` runs the supervisor. ``isolation`` says how tasks are kept apart.
    """

    logs_outlive_pods = True

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        nodes: Iterable[Mapping[str, Any] | LocalNode],
        *,
        shell: str = "/bin/bash",
        python: str = sys.executable,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        isolation: Isolation = Isolation(),
    ) -> None:
        self.state_dir = Path(state_dir)
        self.pods_dir = self.state_dir / "pods"
        self.storage_dir = self.state_dir / "storage"
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        parsed = [n if isinstance(n, LocalNode) else LocalNode.from_config(n) for n in nodes]
        self.nodes: dict[str, LocalNode] = {}
        for node in parsed:
            if node.name in self.nodes:
                raise ValueError(f"nodes.{node.name}: listed twice")
            self.nodes[node.name] = node
        self.shell = shell
        self.python = python
        self.startup_timeout = startup_timeout
        self.isolation = isolation
        self.registry = TenantRegistry(isolation.registry_dir or self.state_dir, isolation.uid_base)
        self._tools: sandbox.Tools | None = None
        if isolation.mode in ("auto", "required"):
            found = sandbox.probe(isolation.bwrap)
            self._tools = found if isinstance(found, sandbox.Tools) else None
            self.unsandboxed_reason = found if isinstance(found, str) else ""
        else:
            self.unsandboxed_reason = f"isolation mode {isolation.mode}"
        self._announce()
        # Supervisors this instance spawned, kept to reap them (no zombies) and to signal
        # them before they have recorded their pid.
        self._spawned_by: int = os.getpid()
        self._spawned_children: dict[str, subprocess.Popen[bytes]] = {}
        # Records by pod name with the identity of the file they were read from: a
        # record is re-read only when another write replaced the file.
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}

    @property
    def sandboxed(self) -> bool:
        """Whether tasks run in sandboxes (else :attr:`unsandboxed_reason` says why not)."""
        return self._tools is not None

    def _announce(self) -> None:
        key = (str(self.state_dir), self.unsandboxed_reason)
        if key in _announced:
            return
        _announced.add(key)
        if self.sandboxed:
            logger.info("local backend %s: tasks run sandboxed, one uid per tenant", self.state_dir)
        elif self.isolation.mode == "off":
            logger.warning("local backend %s: tasks run unsandboxed as the worker's user, every tenant's "
                           "(isolation off): they can read each other's files and pai's data", self.state_dir)
        else:
            logger.warning("local backend %s: %s", self.state_dir, self._refusal_reason())

    def _refusal_reason(self) -> str:
        if self.isolation.mode == "required":
            return f"tasks must run sandboxed, and cannot: {self.unsandboxed_reason}"
        return (
            f"tasks cannot run sandboxed ({self.unsandboxed_reason}), so only one tenant's tasks run here "
            f"(the first one's, kept in {self.registry.directory / sandbox.TENANT_FILE})"
        )

    @property
    def _spawned(self) -> dict[str, subprocess.Popen[bytes]]:
        """The supervisors this process spawned. After a fork (worker pools) they are
        not the new process's children: it must find them through their records."""
        if os.getpid() != self._spawned_by:
            self._spawned_by = os.getpid()
            self._spawned_children = {}
        return self._spawned_children

    # -- the interface ---------------------------------------------------------------

    def list_nodes(self) -> list[NodeInfo]:
        return [
            NodeInfo(
                name=n.name,
                ip=n.ip,
                gpu=n.gpu,
                cpu=n.cpu,
                memory_mb=n.memory_mb,
                labels=dict(n.labels),
                ready=n.ready,
                schedulable=n.schedulable,
            )
            for n in sorted(self.nodes.values(), key=lambda n: n.name)
        ]

    def create_pod(self, spec: PodSpec) -> PodObservation:
        node = self._validate(spec)
        with self._locked():
            record = self._load(spec.name)
            if record is not None and not record["deleted"]:
                record = self._refresh(record)
            if record is not None and not record["deleted"]:
                if record["spec_digest"] != _spec_digest(spec):
                    self._event(spec.name, "Warning", "AlreadyExists", "a create with a different spec was ignored")
                return self._observation(record)
            pod_dir = self.pods_dir / spec.name
            if pod_dir.exists():
                shutil.rmtree(pod_dir)  # a deleted earlier incarnation: start clean
            try:
                work = pod_dir / "work"
                work.mkdir(parents=True)
                work_path = os.path.realpath(work)
                user = self._task_user(spec, work_path)
                env, binds = self._environment(spec, node, user)
                if user is not None:
                    os.chown(work, user.uid, user.gid)
                    work.chmod(0o700)
                    binds.append(Bind(work_path, work_path))
                if spec.secrets:
                    secrets = os.path.realpath(_write_secrets(pod_dir / "secrets", spec.secrets, user))
                    env[SECRETS_DIR_ENV] = secrets
                    binds.append(Bind(secrets, secrets, read_only=True))
                launch = {"shell": self.shell, "script": spec.commands, "env": env, "cwd": work_path, "grace_seconds": spec.grace_seconds}
                if user is not None and self._tools is not None:
                    binds += sandbox.account_files(pod_dir, user)
                    launch["sandbox"] = sandbox.command(
                        self._tools, user, workdir=work_path, binds=binds, hidden=self._hidden(),
                        devices=self.isolation.devices, shm_mb=spec.shm_mb,
                    )
                shim.write_json(pod_dir / "launch.json", launch)
            except PermanentCreationError:
                shutil.rmtree(pod_dir, ignore_errors=True)
                raise
            except OSError as exc:
                shutil.rmtree(pod_dir, ignore_errors=True)
                raise TransientCreationError(f"cannot prepare pod {spec.name}: {exc}") from exc
            record = {
                "name": spec.name,
                "uid": uuid.uuid4().hex,
                "namespace": spec.namespace,
                "node": node.name,
                "ip": node.ip,
                "labels": dict(spec.labels),
                "annotations": dict(spec.annotations),
                "devices": list(spec.devices),
                "spec_digest": _spec_digest(spec),
                "grace_seconds": spec.grace_seconds,
                "created_at": _now(),
                "phase": "Pending",
                "reason": "ContainerCreating",
                "container_reason": "",
                "message": "",
                "exit_code": None,
                "signal": None,
                "started_at": None,
                "finished_at": None,
                "deletion_requested_at": None,
                "term_delivered": False,
                "deleted": False,
            }
            self._save(record)
            sandboxed = f", in a sandbox as {user.name} (uid {user.uid})" if user is not None else ""
            self._event(spec.name, "Normal", "Scheduled", f"assigned {spec.name} to {node.name}{sandboxed}")
            try:
                self._spawn(spec.name, pod_dir)
            except OSError as exc:
                shutil.rmtree(pod_dir, ignore_errors=True)
                self._cache.pop(spec.name, None)
                raise TransientCreationError(f"cannot start pod {spec.name}: {exc}") from exc
            return self._observation(record)

    def delete_pod(self, name: str, uid: str | None = None, grace_seconds: float | None = None) -> bool:
        with self._locked():
            record = self._load(name)
            if record is None or record["deleted"]:
                return False
            if uid is not None and uid != record["uid"]:
                raise PodConflictError(f"pod {name} has uid {record['uid']}, not {uid}")
            record = self._refresh(record)
            if record["deleted"]:
                return True
            if record["phase"] in ("Succeeded", "Failed"):
                record["deleted"] = True
                self._remove_secrets(name)
                self._save(record)
                return True
            if record["deletion_requested_at"] is not None:
                if grace_seconds == 0:
                    self._kill_task(name)
                return True
            grace = record["grace_seconds"] if grace_seconds is None else max(0.0, float(grace_seconds))
            pod_dir = self.pods_dir / name
            shim.write_json(pod_dir / "deletion.json", {"grace_seconds": grace, "requested_at": _now()})
            record["deletion_requested_at"] = _now()
            record["grace_seconds"] = grace
            if grace == 0:
                self._kill_task(name)
            record["term_delivered"] = self._signal_supervisor(name)
            self._save(record)
            self._event(name, "Normal", "Killing", f"stopping the task (grace period {grace:g} s)")
            return True

    def list_pods(self, selector: dict[str, str] | None = None) -> list[PodObservation]:
        selector = selector or {}
        with self._locked():
            records = [self._refresh(r) for r in self._records() if not r["deleted"]]
        return [
            self._observation(r)
            for r in sorted(records, key=lambda r: r["name"])
            if not r["deleted"] and all(r["labels"].get(k) == v for k, v in selector.items())
        ]

    def poll(self, since: str | None = None) -> list[PodObservation]:
        with self._locked():
            current = self._current_version()
            if since is not None:
                try:
                    cursor = int(since)
                except ValueError:
                    raise CursorExpiredError(f"not a cursor of this backend: {since!r}") from None
                if cursor > current:
                    raise CursorExpiredError(f"cursor {cursor} is ahead of this state ({current})")
            records = [self._refresh(r) if not r["deleted"] else r for r in self._records()]
        if since is None:
            chosen = [r for r in records if not r["deleted"]]
        else:
            chosen = [r for r in records if r["resource_version"] > cursor]
        return [self._observation(r) for r in sorted(chosen, key=lambda r: r["resource_version"])]

    def cursor(self) -> str:
        with self._locked():
            return str(self._current_version())

    def read_log(self, name: str, tail_lines: int | None = None, stream: LogStream = "all") -> str:
        if stream not in ("all", "stdout", "stderr"):
            raise ValueError(f"stream: must be all, stdout or stderr, not {stream!r}")
        pod_dir = self.pods_dir / name
        if not is_valid_pod_name(name) or not (pod_dir / "pod.json").exists():
            raise PodNotFoundError(f"no pod {name}")
        path = pod_dir / f"{stream}.log"
        if not path.exists():
            return ""
        if tail_lines is not None:
            return _tail(path, tail_lines)
        return path.read_bytes().decode("utf-8", errors="replace")

    def read_events(self, name: str) -> list[PodEvent]:
        path = self.pods_dir / name / "events.jsonl"
        if not is_valid_pod_name(name) or not path.exists():
            return []
        events = []
        for line in path.read_text().splitlines():
            item = json.loads(line)
            events.append(PodEvent(name, item["type"], item["reason"], item["message"], _dt(item["at"])))
        return events

    def task_pid(self, name: str) -> int | None:
        """The pid of a running pod's task (the leader of its process group), or ``None``
        when the pod has no live task: what efficiency sampling reads CPU use from."""
        process = shim.read_json(self.pods_dir / name / "process.json")
        if process is not None and _is_same_process(process.get("pid"), process.get("start"), process.get("boot_id")):
            return int(process["pid"])
        return None

    def forget_pod(self, name: str) -> None:
        with self._locked():
            record = self._load(name)
            if record is None:
                return
            if not record["deleted"]:
                raise PodConflictError(f"pod {name} is not deleted")
            shutil.rmtree(self.pods_dir / name, ignore_errors=True)
            self._cache.pop(name, None)

    def close(self) -> None:
        # Reap what already ended; the others keep running and are reparented.
        for popen in self._spawned.values():
            popen.poll()
        self._spawned.clear()

    # -- creation --------------------------------------------------------------------

    def _validate(self, spec: PodSpec) -> LocalNode:
        if not is_valid_pod_name(spec.name):
            raise PermanentCreationError(f"name: {spec.name!r} is not a DNS label of at most 63 characters")
        node = self.nodes.get(spec.node)
        if node is None:
            raise PermanentCreationError(f"node: no node {spec.node!r}")
        if len(set(spec.devices)) != len(spec.devices) or any(not 0 <= d < node.gpu for d in spec.devices):
            raise PermanentCreationError(f"devices: {list(spec.devices)} are not devices of node {node.name} (0..{node.gpu - 1})")
        if not spec.commands.strip():
            raise PermanentCreationError("commands: empty")
        for key, value in spec.env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key or "\0" in key + value:
                raise PermanentCreationError(f"env: {key!r} is not a valid variable name and string value")
        seen: set[str] = set()
        for mount in spec.storage_mounts:
            if mount.sub_path.startswith("/") or ".." in Path(mount.sub_path).parts:
                raise PermanentCreationError(f"storage {mount.name}: sub path must stay inside the storage")
            if self.sandboxed:
                try:
                    path = sandbox.check_mount_path(mount.mount_path, reserved=self._hidden())
                except ValueError as exc:
                    raise PermanentCreationError(f"storage {mount.name}: {exc}") from exc
                if path in seen:
                    raise PermanentCreationError(f"storage {mount.name}: another storage is mounted at {path}")
                seen.add(path)
        for key, value in spec.secrets.items():
            if not isinstance(key, str) or not is_valid_secret_key(key) or not isinstance(value, str):
                raise PermanentCreationError(f"secrets: {key!r} is not a valid file name with a text value")
        return node

    def _task_user(self, spec: PodSpec, home: str) -> TaskUser | None:
        """The sandbox user of the pod's tenant; ``None`` when tasks run as the worker's
        user, which only the tenant that claimed this machine may (unless isolation is off)."""
        if self._tools is not None:
            uid = self.registry.uid_of(spec.namespace)
            return TaskUser(uid=uid, gid=uid, name=sandbox.user_name(spec.namespace), home=home)
        if self.isolation.mode == "off":
            return None
        if self.isolation.mode == "required":
            raise PermanentCreationError(self._refusal_reason())
        owner = self.registry.claim(spec.namespace)
        if owner != spec.namespace:
            raise PermanentCreationError(f"namespace {spec.namespace}: {self._refusal_reason()}, and they are {owner}'s")
        return None

    def _hidden(self) -> list[str]:
        """Directories no task sees: this state, the tenant registry, and the isolation's ``hidden``."""
        directories = {self.state_dir, self.registry.directory, *map(Path, self.isolation.hidden)}
        return sorted(os.path.realpath(d) for d in directories)

    def _check_storage_dir(self, name: str, local: Path, *, host: bool) -> None:
        """A sandbox shows a storage's directory only: never pai's own, nor a place a task linked it to."""
        link = sandbox.link_made_by_a_task(local, self.isolation.uid_base)
        if link is not None:
            raise PermanentCreationError(f"storage {name}: {link} is a symbolic link a task made")
        if not host:
            return
        real = os.path.realpath(local)
        state = os.path.realpath(self.state_dir)
        for hidden in self._hidden():
            if sandbox.is_inside(hidden, real) or sandbox.is_inside(real, state):
                raise PermanentCreationError(f"storage {name}: host path {local} holds pai's own files")

    def _environment(self, spec: PodSpec, node: LocalNode, user: TaskUser | None) -> tuple[dict[str, str], list[Bind]]:
        """The task's environment, and the sandbox's binds of its storages."""
        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        if user is not None:
            env.update(HOME=user.home, USER=user.name, LOGNAME=user.name)
        env.update(spec.env)
        mounts: dict[str, str] = {}
        binds: list[Bind] = []
        for mount in spec.storage_mounts:
            if mount.host_path:
                local = Path(mount.host_path)
            else:
                root = self.storage_dir / (mount.claim or mount.name)
                local = root / mount.sub_path if mount.sub_path else root
            if user is not None:
                self._check_storage_dir(mount.name, local, host=bool(mount.host_path))
            try:
                created = not local.is_dir()
                local.mkdir(parents=True, exist_ok=True)
                if user is not None and created:
                    os.chown(local, user.uid, user.gid, follow_symlinks=False)
            except OSError as exc:
                raise PermanentCreationError(f"storage {mount.name}: cannot use {local}: {exc}") from exc
            where = str(local)
            if user is not None:
                where = os.path.normpath(mount.mount_path)
                binds.append(Bind(os.path.realpath(local), where, read_only=mount.read_only))
            mounts[mount.mount_path] = where
            env[f"PAI_STORAGE_{_ENV_NAME.sub('_', mount.name.upper())}"] = where
        if mounts:
            env["PAI_STORAGE_MOUNTS"] = json.dumps(mounts, sort_keys=True)
        env["CUDA_VISIBLE_DEVICES"] = node.visible_devices(spec.devices)
        return env, binds

    def _spawn(self, name: str, pod_dir: Path) -> None:
        # SIGTERM stays blocked in the supervisor until its handler is installed, so a
        # delete right after the create is never lost (the mask is inherited by the child
        # and only this thread's mask changes here).
        old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        try:
            with open(pod_dir / "supervisor.log", "ab") as errors:
                popen = subprocess.Popen(
                    [self.python, "-I", "-S", str(SHIM_PATH), str(pod_dir)],
                    stdin=subprocess.DEVNULL,
                    stdout=errors,
                    stderr=errors,
                    start_new_session=True,
                    close_fds=True,
                )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self._spawned[name] = popen

    # -- observing -------------------------------------------------------------------

    def _refresh(self, record: dict[str, Any]) -> dict[str, Any]:
        """Bring a live record up to date with its processes; saves it when it changed."""
        name = record["name"]
        pod_dir = self.pods_dir / name
        before = dict(record)
        if record["phase"] in ("Succeeded", "Failed"):
            if record["deletion_requested_at"] is not None and not record["deleted"]:
                record["deleted"] = True
                self._save(record)
            return record
        exit_info = shim.read_json(pod_dir / "exit.json")
        process = shim.read_json(pod_dir / "process.json")
        if exit_info is None:
            if process is not None and _is_same_process(process["shim_pid"], process["shim_start"], process["boot_id"]):
                self._mark_running(record, process)
                if record["deletion_requested_at"] is not None:
                    self._continue_deletion(record)
            elif process is None and not self._startup_overdue(record):
                pass
            else:
                # The supervisor may have written exit.json just before it ended.
                exit_info = shim.read_json(pod_dir / "exit.json")
                if exit_info is None:
                    self._mark_lost(record, process)
        if exit_info is not None:
            self._mark_exited(record, exit_info)
        if record["phase"] in ("Succeeded", "Failed") and record["deletion_requested_at"] is not None:
            record["deleted"] = True
        if record != before:
            self._reap(name)
            if record["phase"] in TERMINAL_PHASES:
                self._remove_secrets(name)
            self._save(record)
        return record

    def _remove_secrets(self, name: str) -> None:
        """The task has ended: nothing reads its secret files any more."""
        shutil.rmtree(self.pods_dir / name / "secrets", ignore_errors=True)

    def _startup_overdue(self, record: dict[str, Any]) -> bool:
        popen = self._spawned.get(record["name"])
        if popen is not None:
            return popen.poll() is not None
        return _now() - record["created_at"] > self.startup_timeout

    def _mark_running(self, record: dict[str, Any], process: dict[str, Any]) -> None:
        if record["phase"] == "Pending":
            record.update(phase="Running", reason="", started_at=process["started_at"])
            self._event(record["name"], "Normal", "Started", f"started the task (pid {process['pid']})")

    def _mark_exited(self, record: dict[str, Any], exit_info: dict[str, Any]) -> None:
        if record["phase"] in ("Succeeded", "Failed"):
            return
        code = exit_info["exit_code"]
        if not exit_info["started"]:
            record.update(phase="Failed", reason="Deleted", message="stopped before the task started")
        elif code == 0:
            record.update(phase="Succeeded", container_reason="Completed")
        else:
            record.update(phase="Failed", container_reason="Error")
        record.update(
            reason="" if exit_info["started"] else record["reason"],
            exit_code=code,
            signal=exit_info["signal"],
            started_at=exit_info.get("started_at", record["started_at"]),
            finished_at=exit_info["finished_at"],
        )
        kind = "Normal" if code == 0 else "Warning"
        detail = f"exit code {code}" + (f" (signal {exit_info['signal']})" if exit_info["signal"] else "")
        self._event(record["name"], kind, "Completed" if code == 0 else "Failed", detail)

    def _mark_lost(self, record: dict[str, Any], process: dict[str, Any] | None) -> None:
        if process is not None and _is_same_process(process["pid"], process["start"], process["boot_id"]):
            try:
                os.killpg(process["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        message = (
            "the pod's supervisor ended without recording an exit (killed, or the machine restarted)"
            if process is not None
            else "the pod's supervisor never started its task"
        )
        record.update(phase="Failed", reason=REASON_NODE_LOST, message=message, finished_at=_now())
        self._event(record["name"], "Warning", REASON_NODE_LOST, message)

    def _continue_deletion(self, record: dict[str, Any]) -> None:
        if not record["term_delivered"]:
            record["term_delivered"] = self._signal_supervisor(record["name"])
        overdue = record["deletion_requested_at"] + record["grace_seconds"] + KILL_MARGIN_SECONDS
        if _now() > overdue:
            self._kill_task(record["name"])

    def _signal_supervisor(self, name: str) -> bool:
        """SIGTERM to the pod's supervisor (it runs the stop sequence); whether sent."""
        popen = self._spawned.get(name)
        if popen is not None and popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            return True
        process = shim.read_json(self.pods_dir / name / "process.json")
        if process is not None and _is_same_process(process["shim_pid"], process["shim_start"], process["boot_id"]):
            os.kill(process["shim_pid"], signal.SIGTERM)
            return True
        return False

    def _kill_task(self, name: str) -> None:
        process = shim.read_json(self.pods_dir / name / "process.json")
        if process is not None and _is_same_process(process["pid"], process["start"], process["boot_id"]):
            try:
                os.killpg(process["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _reap(self, name: str) -> None:
        popen = self._spawned.get(name)
        if popen is not None and popen.poll() is not None:
            del self._spawned[name]

    # -- records ---------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.state_dir / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _current_version(self) -> int:
        try:
            return int((self.state_dir / "resource_version").read_text())
        except FileNotFoundError:
            return 0

    def _save(self, record: dict[str, Any]) -> None:
        """Write the record under a new resource version (the caller holds the lock)."""
        version = self._current_version() + 1
        shim.write_json(self.state_dir / "resource_version", version)
        record["resource_version"] = version
        path = self.pods_dir / record["name"] / "pod.json"
        shim.write_json(path, record)
        self._cache[record["name"]] = (_file_key(path), dict(record))

    def _load(self, name: str) -> dict[str, Any] | None:
        path = self.pods_dir / name / "pod.json"
        try:
            key = _file_key(path)
        except FileNotFoundError:
            self._cache.pop(name, None)
            return None
        cached = self._cache.get(name)
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        record = shim.read_json(path)
        if record is None:
            return None
        self._cache[name] = (key, dict(record))
        return record

    def _records(self) -> list[dict[str, Any]]:
        records = []
        for entry in sorted(os.listdir(self.pods_dir)):
            record = self._load(entry)
            if record is not None:
                records.append(record)
        return records

    def _event(self, name: str, kind: str, reason: str, message: str) -> None:
        line = json.dumps({"type": kind, "reason": reason, "message": message, "at": _now()})
        with open(self.pods_dir / name / "events.jsonl", "a") as f:
            f.write(line + "\n")

    def _observation(self, record: dict[str, Any]) -> PodObservation:
        return PodObservation(
            name=record["name"],
            uid=record["uid"],
            phase=record["phase"],
            resource_version=str(record["resource_version"]),
            node=record["node"],
            ip=record["ip"],
            labels=dict(record["labels"]),
            exit_code=record["exit_code"],
            signal=record["signal"],
            reason=record["reason"],
            container_reason=record["container_reason"],
            message=record["message"],
            started_at=_dt(record["started_at"]),
            finished_at=_dt(record["finished_at"]),
            deletion_requested=record["deletion_requested_at"] is not None,
            deleted=record["deleted"],
        )
