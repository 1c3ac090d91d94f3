import json
import os
import time

import pytest

from scheduler.backends.local import LocalBackend
from scheduler.backends.local.sandbox import Isolation, probe

NODES = [
    {"name": "gpu-node-1", "gpu": 4, "cpu": 32, "memory_mb": 262144, "labels": {"sku": "A100"}},
    {"name": "gpu-node-2", "gpu": 2, "gpu_ids": ["GPU-aaaa", "GPU-bbbb"], "ip": "127.0.0.2"},
    {"name": "cpu-node-1", "cpu": 8, "memory": 16384},
]


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "state"


def require_sandbox():
    """Skip where no sandbox can be had (not root); as root it must work, so CI (root) never skips."""
    found = probe()
    if not isinstance(found, str):
        return
    if os.geteuid() != 0:
        pytest.skip(f"the sandbox needs root (CI runs as root): {found}")
    pytest.fail(f"as root the local backend's sandbox must work: {found}")


@pytest.fixture(params=["sandboxed", "plain"])
def isolation(request):
    """Each backend test runs with tasks in sandboxes and as the worker's user."""
    if request.param == "sandboxed":
        require_sandbox()
        return Isolation(mode="required")
    return Isolation(mode="off")


@pytest.fixture
def backend(state_dir, isolation):
    b = LocalBackend(state_dir, NODES, isolation=isolation)
    yield b
    # Leave nothing running behind a test.
    for pod in b.list_pods():
        b.delete_pod(pod.name, grace_seconds=0)
    b.close()


def wait_for(backend, name, condition, timeout=10.0):
    """Poll the backend until the pod's observation satisfies ``condition``; return it.
    A deleted pod is looked up in the change feed."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [o for o in backend.poll("0") if o.name == name]
        if seen and condition(seen[-1]):
            return seen[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name}: condition not met in {timeout}s; last seen {seen[-1:] }")
        time.sleep(0.02)


def wait_terminal(backend, name, timeout=10.0):
    return wait_for(backend, name, lambda o: o.terminal, timeout)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


def group_processes(backend, name):
    """{host pid: command line} of the processes in the pod's task's process group: its
    shell and what it started (and bubblewrap's processes, in the sandbox)."""
    try:
        pgid = json.loads((backend.pods_dir / name / "process.json").read_text())["pid"]
    except FileNotFoundError:
        return {}  # not started yet
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            found[int(entry)] = cmdline
    return found


def wait_for_process(backend, name, command, timeout=5.0):
    """The pod's processes once one runs ``command``."""
    deadline = time.monotonic() + timeout
    while True:
        processes = group_processes(backend, name)
        if command in processes.values():
            return processes
        assert time.monotonic() < deadline, f"{command!r} never ran in pod {name}: {processes}"
        time.sleep(0.02)
