"""How the local backend keeps tasks apart: a bubblewrap sandbox per task, one uid per tenant.

A sandboxed task runs as an unprivileged uid of its own tenant (the pod's namespace),
allocated once and kept in ``local-task-uids.json`` of the registry directory (pai's
data directory under the worker), in namespaces of its own (mount, pid, IPC). Its
filesystem is a fresh root that holds only:

- the system, read-only: ``/usr``, ``/etc``, ``/opt``, ``/sys`` and the top-level links
  or directories ``/bin``, ``/sbin``, ``/lib*``; a private ``/proc`` (its own processes
  only), a minimal ``/dev`` plus the GPU device nodes (``/dev/nvidia*``, ``/dev/dri``),
  an empty ``/tmp`` and a ``/dev/shm`` of the pod's ``shm_mb``;
- its working directory and its secrets (read-only), at their paths on the host, and
  ``/etc/passwd`` and ``/etc/group`` naming its user;
- its storages at their mount paths (``/mnt/data``), read-only where the storage is.

Everything else — other pods' directories, logs and secrets, other tenants' storages,
the database, the worker's home — does not exist in the sandbox; ``hidden`` directories
(pai's data directory) are covered by an empty tmpfs even where a system directory
would show them. The uid is dropped with ``setpriv`` (no capabilities, no new
privileges: setuid programs do not elevate), so the files a task writes belong to its
tenant, and DAC keeps tenants apart on a shared filesystem too. A storage directory
reached through a symbolic link a task made is refused (a task must not point a later
task's storage elsewhere); a task of the same tenant that swaps a directory for such a
link between that check and bubblewrap's mount is not caught.

Not isolated: the network (tasks talk to each other over the host's addresses, as with
OpenPAI's host networking; services listening on the machine must authenticate their
clients), CPU, memory and disk use (cgroups are owned by whoever runs the machine —
systemd, a container runtime — and come as v1 or v2, so pai does not create them; and
``RLIMIT_AS`` would break CUDA, which reserves large address spaces, while
``RLIMIT_CPU`` limits CPU seconds, not a share), GPUs beyond ``CUDA_VISIBLE_DEVICES``
(every GPU device node is present), and user namespaces inside the sandbox.

bubblewrap stays the task's parent (it relays the exit status, ``128 + N`` for a task
killed by signal N, as a shell or a container runtime reports it: the signal itself is
not known). It ignores SIGTERM, so a stop's SIGTERM to the process group reaches the
task while bubblewrap waits; ``env --default-signal=TERM`` gives the task the default
disposition back, and the supervisor holds a stop's SIGTERM until the task runs (a
signal sent while the sandbox is set up would be lost). ``--die-with-parent`` ends the
sandbox with its supervisor, and the
end of its pid namespace ends every process the task left behind, even one that
started a session of its own.

The sandbox needs root (to run tasks as other users), Linux namespaces, and bubblewrap,
``setpriv`` (util-linux) and ``env`` (coreutils ≥ 8.31) on the host: :func:`probe`
runs a sandbox once to find out. Without it, the backend runs tasks as the worker's user
(``single-tenant``: the first tenant to run a task on this data directory is the only
one that may; ``off``: anyone, no isolation at all — development only).
"""

from __future__ import annotations

import fcntl
import glob
import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

MODES = ("auto", "required", "single-tenant", "off")
# Above systemd's container range (524288–1879048191), below its "foreign" range
# (2147352576–): no distribution hands these out.
DEFAULT_UID_BASE = 1_900_000_000
GPU_DEVICES = ("/dev/nvidia*", "/dev/dri")
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/sys")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Where a storage may not be mounted: in what the sandbox shows read-only or makes
# itself, or over a directory the sandbox needs.
RESERVED_TREES = ("/proc", "/dev", *SYSTEM_DIRS, *SYSTEM_LINKS)
RESERVED_PATHS = ("/", "/tmp", "/run")
UIDS_FILE = "local-task-uids.json"
TENANT_FILE = "local-tenant"
PROBE_TIMEOUT = 20.0
_USER_NAME = re.compile(r"[^a-z0-9_-]")


@dataclass(frozen=True)
class Isolation:
    """The local backend's isolation settings.

    ``mode``: ``auto`` sandboxes when the sandbox can be had, else runs one tenant
    only; ``required`` sandboxes or runs nothing; ``single-tenant`` never sandboxes
    and runs one tenant only; ``off`` never sandboxes and runs every tenant (no
    isolation: development only). ``registry_dir`` keeps the tenants' uids and the
    single tenant (default: the backend's state directory; give every local cluster
    of one pai the same). ``hidden``: directories a task must never see. ``devices``:
    device nodes (globs) every sandbox gets.
    """

    mode: str = "auto"
    registry_dir: str | os.PathLike[str] | None = None
    hidden: tuple[str | os.PathLike[str], ...] = ()
    uid_base: int = DEFAULT_UID_BASE
    bwrap: str = "bwrap"
    devices: tuple[str, ...] = GPU_DEVICES

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"isolation mode: must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not 0 < self.uid_base < 2**32 - 2**20:
            raise ValueError(f"uid base: {self.uid_base} leaves no room for tenants' uids")


@dataclass(frozen=True)
class Bind:
    """A host path the sandbox shows at ``dest``."""

    source: str
    dest: str
    read_only: bool = False
    device: bool = False


@dataclass(frozen=True)
class TaskUser:
    uid: int
    gid: int
    name: str
    home: str


@dataclass(frozen=True)
class Tools:
    bwrap: str
    setpriv: str
    env: str


def user_name(namespace: str) -> str:
    """The task user's name for a namespace: ``pai-team-a`` stays, ``default`` becomes ``pai-default``."""
    name = _USER_NAME.sub("-", namespace.lower())
    return (name if name.startswith("pai-") else f"pai-{name}")[:32]


def is_inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it."""
    return PurePosixPath(path).is_relative_to(directory)


def check_mount_path(mount_path: str, reserved: Sequence[str] = ()) -> str:
    """The normalised mount path of a storage in the sandbox; ``ValueError`` saying why not."""
    if not mount_path.startswith("/") or "\0" in mount_path:
        raise ValueError(f"mount path {mount_path!r} must be absolute")
    if ".." in PurePosixPath(mount_path).parts:
        raise ValueError(f"mount path {mount_path!r} must not contain '..'")
    path = os.path.normpath(mount_path)
    if path in RESERVED_PATHS:
        raise ValueError(f"mount path {path} would replace a directory every task needs")
    for system in RESERVED_TREES:
        if is_inside(path, system):
            raise ValueError(f"mount path {path} is inside {system}, which the sandbox provides itself")
    for other in reserved:
        if is_inside(path, other) or is_inside(other, path):
            raise ValueError(f"mount path {path} overlaps pai's own directory {other}")
    return path


def link_made_by_a_task(path: str | os.PathLike[str], uid_base: int) -> str | None:
    """The first symbolic link on ``path`` that a task made (owned by a tenant's uid), if any:
    a task must not point another task's storage, or root's hands, somewhere else."""
    current = PurePosixPath("/")
    for part in PurePosixPath(os.path.abspath(path)).parts[1:]:
        current /= part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode) and st.st_uid >= uid_base:
            return str(current)
    return None


def _system_binds() -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        if os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    for entry in SYSTEM_LINKS:
        if os.path.islink(entry):
            args += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            args += ["--ro-bind", entry, entry]
    if os.path.isdir("/run/systemd/resolve"):  # where /etc/resolv.conf often links (systemd-resolved)
        args += ["--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/run/systemd"]
        args += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
    return args


def command(
    tools: Tools,
    user: TaskUser,
    *,
    workdir: str,
    binds: Sequence[Bind],
    hidden: Sequence[str] = (),
    devices: Sequence[str] = (),
    shm_mb: int = 512,
) -> list[str]:
    """The command prefix that runs a program in the task's sandbox as ``user``, in ``workdir``."""
    args = [tools.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for setpriv; it drops them with the uid
    args += _system_binds()
    args += ["--proc", "/proc", "--dev", "/dev"]
    binds = [*binds, *(Bind(d, d, device=True) for pattern in devices for d in sorted(glob.glob(pattern)))]
    args += ["--perms", "1777", "--tmpfs", "/tmp"]
    args += ["--perms", "1777", "--size", str(max(1, shm_mb) * 1024 * 1024), "--tmpfs", "/dev/shm"]
    shown = [d for d in (*SYSTEM_DIRS, *SYSTEM_LINKS) if os.path.isdir(d) and not os.path.islink(d)]
    masks = [d for d in hidden if any(is_inside(d, s) for s in shown)]
    for directory in masks:
        args += ["--tmpfs", directory]
    # Shallow paths first, so that a storage mounted inside another is not covered by it.
    ordered = sorted(binds, key=lambda b: (len(PurePosixPath(b.dest).parts), b.dest))
    mounted = {"/proc", "/dev", "/dev/shm", "/tmp", *masks, *(b.dest for b in ordered)}
    made: set[str] = set()
    for bind in ordered:
        # bubblewrap makes missing parents 0700 (root's): the task could not walk to its
        # own directories. They are made 0755 first, except where the host has them.
        for parent in reversed(PurePosixPath(bind.dest).parents[:-1]):
            path = str(parent)
            on_host = any(is_inside(path, s) for s in shown) and not any(is_inside(path, m) for m in masks)
            if path not in made and path not in mounted and not on_host:
                args += ["--perms", "0755", "--dir", path]
                made.add(path)
        kind = "--dev-bind" if bind.device else "--ro-bind" if bind.read_only else "--bind"
        args += [kind, bind.source, bind.dest]
    args += ["--chdir", workdir, "--"]
    args += [tools.setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    args += ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    args += [tools.env, "--default-signal=TERM"]
    return args


def account_files(directory: Path, user: TaskUser) -> tuple[Bind, Bind]:
    """``/etc/passwd`` and ``/etc/group`` as the host has them plus the task's user and group."""
    binds = []
    for name, line in (
        ("passwd", f"{user.name}:x:{user.uid}:{user.gid}:pai task:{user.home}:/bin/bash\n"),
        ("group", f"{user.name}:x:{user.gid}:\n"),
    ):
        try:
            host = Path("/etc", name).read_text()
        except OSError:
            host = ""
        if host and not host.endswith("\n"):
            host += "\n"
        path = directory / name
        path.write_text(host + line)
        path.chmod(0o644)
        binds.append(Bind(str(path), f"/etc/{name}", read_only=True))
    return binds[0], binds[1]


def _tools(bwrap: str) -> Tools | str:
    found = {name: shutil.which(name) for name in ("setpriv", "env")}
    resolved = shutil.which(bwrap)
    if resolved is None:
        return "bubblewrap (bwrap) is not installed (`make system-deps` installs Debian's bubblewrap)"
    missing = [name for name, path in found.items() if path is None]
    if missing:
        return f"{', '.join(missing)} is not installed"
    return Tools(bwrap=resolved, setpriv=found["setpriv"], env=found["env"])


@cache
def probe(bwrap: str = "bwrap") -> Tools | str:
    """The tools when a sandbox works on this machine, else why not (cached per process)."""
    if not sys.platform.startswith("linux"):
        return "tasks can only be sandboxed on Linux"
    if os.geteuid() != 0:
        return "the worker does not run as root, so it cannot run tasks as other users"
    tools = _tools(bwrap)
    if isinstance(tools, str):
        return tools
    with tempfile.TemporaryDirectory(prefix="pai-sandbox-probe-") as work:
        os.chmod(work, 0o755)
        user = TaskUser(uid=2**32 - 3, gid=2**32 - 3, name="pai-probe", home=work)
        argv = command(tools, user, workdir=work, binds=[Bind(work, work)])
        try:
            done = subprocess.run(
                [*argv, "/bin/sh", "-c", 'test "$(id -u)" = 4294967293'],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap cannot run here: {exc}"
    if done.returncode != 0:
        detail = (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[-1][:300]
        return f"bubblewrap cannot create a sandbox here: {detail}"
    return tools


class TenantRegistry:
    """The tenants' task uids and, without a sandbox, the one tenant allowed, in ``directory``.

    Both are kept for good: a uid owns files on storages, and a tenant whose tasks ran
    unsandboxed left logs and files another tenant's tasks could read.
    """

    def __init__(self, directory: str | os.PathLike[str], uid_base: int = DEFAULT_UID_BASE) -> None:
        self.directory = Path(directory)
        self.uid_base = uid_base

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "local-tenants.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, name: str, text: str) -> None:
        tmp = self.directory / f"{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        tmp.chmod(0o600)
        os.replace(tmp, self.directory / name)

    def uid_of(self, namespace: str) -> int:
        """The namespace's uid (its gid too), allocated on first use: the next one above
        every uid given so far that no user or group of the host has."""
        with self._locked():
            path = self.directory / UIDS_FILE
            uids: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
            if namespace in uids:
                return uids[namespace]
            uid = max(uids.values(), default=self.uid_base - 1) + 1
            while _taken(uid):
                uid += 1
            uids[namespace] = uid
            self._write(UIDS_FILE, json.dumps(uids, indent=1, sort_keys=True))
            return uid

    def claim(self, namespace: str) -> str:
        """The one namespace whose tasks may run unsandboxed: the first to ask."""
        with self._locked():
            path = self.directory / TENANT_FILE
            if path.exists():
                return path.read_text().strip()
            self._write(TENANT_FILE, namespace + "\n")
            return namespace


def _taken(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False
