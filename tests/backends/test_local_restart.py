"""The local backend survives a worker restart: pods created by a worker process that
has exited are adopted by a new backend over the same state directory, their exits
are still reported, lost supervisors are reported as NodeLost, a recycled pid is never
adopted, and no pod ever runs twice."""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scheduler.backends import PodSpec, StorageMount, TransientCreationError
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.sandbox import Isolation
from scheduler.exitcodes import classify

from .conftest import NODES, alive, wait_for, wait_for_process, wait_terminal

REPO = Path(__file__).resolve().parents[2]
CREATE = """
import json, sys
from scheduler.backends import PodSpec, StorageMount
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.sandbox import Isolation
options = json.loads(sys.argv[3])
options["isolation"] = Isolation(mode=options["isolation"])
backend = LocalBackend(sys.argv[1], json.loads(sys.argv[2]), **options)
for item in json.loads(sys.argv[4]):
    item["storage_mounts"] = tuple(StorageMount(**m) for m in item.get("storage_mounts", ()))
    print(backend.create_pod(PodSpec(**item)).uid)
"""


def create_in_another_worker(state_dir, isolation, *pods, **options):
    """Create pods from a separate worker process that exits right after; their uids."""
    options["isolation"] = isolation.mode
    done = subprocess.run(
        [sys.executable, "-c", CREATE, str(state_dir), json.dumps(NODES), json.dumps(options), json.dumps(pods)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()


def reader(state_dir):
    """A backend that only reads (logs, records): reading changes nothing."""
    return LocalBackend(state_dir, NODES, isolation=Isolation(mode="off"))


def recorded_process(state_dir, name):
    return json.loads((state_dir / "pods" / name / "process.json").read_text())


@pytest.fixture
def restarted(state_dir, isolation):
    """The backend of the restarted worker (created when first used)."""
    backends = []

    def make(**options):
        backends.append(LocalBackend(state_dir, NODES, isolation=isolation, **options))
        return backends[-1]

    yield make
    for b in backends:
        for pod in b.list_pods():
            b.delete_pod(pod.name, grace_seconds=0)


def test_a_running_pod_is_adopted_its_exit_reported_and_it_never_runs_twice(state_dir, tmp_path, isolation, restarted):
    out = str(tmp_path / "out")
    pod = {
        "name": "adopted",
        "node": "gpu-node-1",
        "commands": 'echo run >> "$PAI_STORAGE_OUT/runs"; sleep 0.8; exit 5',
        "storage_mounts": [{"name": "out", "claim": "out", "mount_path": "/mnt/out", "host_path": out}],
    }
    [uid] = create_in_another_worker(state_dir, isolation, pod)
    backend = restarted()
    running = wait_for(backend, "adopted", lambda o: o.phase == "Running")
    assert running.uid == uid
    mounts = (StorageMount(**pod["storage_mounts"][0]),)
    again = backend.create_pod(PodSpec(name="adopted", node="gpu-node-1", commands=pod["commands"], storage_mounts=mounts))
    assert again.uid == uid
    cursor = running.resource_version
    ended = wait_terminal(backend, "adopted")
    assert (ended.phase, ended.exit_code, ended.uid) == ("Failed", 5, uid)
    assert [o.phase for o in backend.poll(cursor)] == ["Failed"]
    assert (tmp_path / "out" / "runs").read_text() == "run\n"


def test_a_task_killed_while_no_worker_runs_is_reported_with_its_signal(state_dir, isolation, restarted):
    create_in_another_worker(state_dir, isolation, {"name": "orphan", "node": "gpu-node-1", "commands": "sleep 30"})
    wait_for_process(reader(state_dir), "orphan", "sleep 30")
    pid = recorded_process(state_dir, "orphan")["pid"]  # the task's shell, or its sandbox
    os.kill(pid, signal.SIGKILL)
    while alive(pid):
        time.sleep(0.01)
    obs = wait_terminal(restarted(), "orphan")
    assert (obs.phase, obs.exit_code, obs.signal, obs.reason) == ("Failed", 137, 9, "")


def test_a_finished_pod_is_reported_by_the_next_worker(state_dir, isolation, restarted):
    create_in_another_worker(state_dir, isolation, {"name": "quick", "node": "cpu-node-1", "commands": "echo done"})
    deadline = time.monotonic() + 10
    while "done" not in reader(state_dir).read_log("quick"):
        assert time.monotonic() < deadline, "the pod never ran"
        time.sleep(0.02)
    obs = wait_terminal(restarted(), "quick")
    assert (obs.phase, obs.exit_code) == ("Succeeded", 0)


def test_a_vanished_supervisor_is_reported_lost_and_its_task_killed(state_dir, isolation, restarted):
    create_in_another_worker(state_dir, isolation, {"name": "vanish", "node": "gpu-node-1", "commands": "sleep 30"})
    processes = wait_for_process(reader(state_dir), "vanish", "sleep 30")
    supervisor = recorded_process(state_dir, "vanish")["shim_pid"]
    os.kill(supervisor, signal.SIGKILL)
    while alive(supervisor):
        time.sleep(0.01)
    if isolation.mode == "off":
        assert all(alive(pid) for pid in processes)  # until the next worker finds it lost
    else:
        # bubblewrap's --die-with-parent: the sandbox ends with its supervisor.
        deadline = time.monotonic() + 2
        while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(alive(pid) for pid in processes)
    obs = wait_terminal(restarted(), "vanish")
    assert (obs.phase, obs.reason, obs.exit_code) == ("Failed", "NodeLost", None)
    assert classify(obs.exit_code, obs.signal, obs.reason, obs.container_reason).code == -1001
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(alive(pid) for pid in processes)


def test_a_recycled_pid_is_not_adopted_nor_killed(state_dir, isolation, restarted):
    create_in_another_worker(state_dir, isolation, {"name": "recycled", "node": "gpu-node-1", "commands": "sleep 30"})
    wait_for_process(reader(state_dir), "recycled", "sleep 30")
    recorded = recorded_process(state_dir, "recycled")
    for pid in (recorded["shim_pid"], recorded["pid"]):
        os.kill(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.01)
    # Another program now holds the pids the pod's processes had.
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        record = state_dir / "pods" / "recycled" / "process.json"
        process = json.loads(record.read_text())
        process.update(shim_pid=stranger.pid, pid=stranger.pid)
        record.write_text(json.dumps(process))
        obs = wait_terminal(restarted(), "recycled")
        assert (obs.phase, obs.reason) == ("Failed", "NodeLost")
        time.sleep(0.1)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_supervisor_that_never_started_is_reported_lost(state_dir, isolation, restarted):
    create_in_another_worker(
        state_dir, isolation, {"name": "stillborn", "node": "cpu-node-1", "commands": "true"}, python="/bin/false"
    )
    backend = restarted(startup_timeout=1.5)
    assert backend.list_pods()[0].phase == "Pending"
    obs = wait_terminal(backend, "stillborn")
    assert (obs.phase, obs.reason) == ("Failed", "NodeLost")
    assert "never started" in obs.message


def test_a_supervisor_that_cannot_be_spawned_is_a_transient_creation_error(state_dir, isolation):
    backend = LocalBackend(state_dir, NODES, python=str(state_dir / "no-such-python"), isolation=isolation)
    with pytest.raises(TransientCreationError):
        backend.create_pod(PodSpec(name="unborn", node="cpu-node-1", commands="true"))
    assert backend.list_pods() == []


def test_two_workers_creating_the_same_pod_at_once_start_it_once(state_dir, tmp_path, restarted):
    out = tmp_path / "out"
    mount = StorageMount(name="out", claim="out", mount_path="/mnt/out", host_path=str(out))
    pod = PodSpec(name="raced", node="gpu-node-1", commands='echo run >> "$PAI_STORAGE_OUT/runs"', storage_mounts=(mount,))
    first, second = restarted(), restarted()
    with ThreadPoolExecutor(max_workers=2) as pool:
        uids = {f.result().uid for f in [pool.submit(first.create_pod, pod), pool.submit(second.create_pod, pod)]}
    assert len(uids) == 1
    wait_terminal(first, "raced")
    assert (out / "runs").read_text() == "run\n"


def test_a_forked_worker_does_not_mistake_its_parents_pods_for_lost(backend):
    backend.create_pod(PodSpec(name="forked", node="cpu-node-1", commands="sleep 1"))
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # a pool worker forked from the process that spawned the pod
        try:
            phases = set()
            for _ in range(10):
                phases |= {o.phase for o in backend.poll(None)}
                time.sleep(0.02)
            os.write(write_end, ",".join(sorted(phases)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    seen = os.read(read_end, 1000).decode().split(",")
    os.close(read_end)
    assert "Failed" not in seen and seen
    assert wait_terminal(backend, "forked").phase == "Succeeded"
