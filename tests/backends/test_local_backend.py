"""The local backend runs real processes: environment, exit codes, stops, idempotency,
change feed, logs and events."""

import json
import os
import time

import pytest

from scheduler.backends import (
    CursorExpiredError,
    PermanentCreationError,
    PodConflictError,
    PodNotFoundError,
    PodSpec,
    StorageMount,
    pod_labels,
)
from scheduler.backends.local import LocalNode
from scheduler.exitcodes import classify

from .conftest import alive, wait_for, wait_for_process, wait_terminal


def spec(name, commands, node="gpu-node-1", **kwargs):
    return PodSpec(name=name, node=node, commands=commands, **kwargs)


def test_nodes_come_from_the_configuration(backend):
    nodes = {n.name: n for n in backend.list_nodes()}
    assert sorted(nodes) == ["cpu-node-1", "gpu-node-1", "gpu-node-2"]
    assert (nodes["gpu-node-1"].gpu, nodes["gpu-node-1"].cpu, nodes["gpu-node-1"].memory_mb) == (4, 32, 262144)
    assert nodes["gpu-node-1"].labels == {"sku": "A100"}
    assert nodes["gpu-node-2"].ip == "127.0.0.2"
    assert nodes["cpu-node-1"].gpu == 0 and nodes["cpu-node-1"].memory_mb == 16384
    assert all(n.ready and n.schedulable for n in nodes.values())


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"gpu": 1}, "name"),
        ({"name": "n", "gpu": -1}, "gpu"),
        ({"name": "n", "gpu": 2, "gpu_ids": ["a"]}, "gpu_ids"),
        ({"name": "n", "gpus": 2}, "gpus"),
    ],
)
def test_a_bad_node_configuration_is_refused_naming_the_field(config, field):
    with pytest.raises(ValueError, match=field):
        LocalNode.from_config(config)


def test_environment_and_visible_devices_reach_the_task(backend, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/pai")
    backend.create_pod(
        spec(
            "env-pod",
            'echo "job=$PAI_JOB_NAME devices=$CUDA_VISIBLE_DEVICES"; echo "db=${DATABASE_URL:-none}"; pwd',
            devices=(1, 3),
            env={"PAI_JOB_NAME": "alice~demo"},
        )
    )
    obs = wait_terminal(backend, "env-pod")
    assert (obs.phase, obs.exit_code) == ("Succeeded", 0)
    log = backend.read_log("env-pod")
    assert "job=alice~demo devices=1,3" in log
    assert "db=none" in log  # the worker's secrets do not leak into tasks
    assert log.splitlines()[-1].endswith("/work")


def test_real_gpu_ids_are_exposed_for_the_placed_devices(backend):
    backend.create_pod(spec("gpu-ids", "echo $CUDA_VISIBLE_DEVICES", node="gpu-node-2", devices=(1,)))
    wait_terminal(backend, "gpu-ids")
    assert backend.read_log("gpu-ids") == "GPU-bbbb\n"


def test_a_pod_without_devices_sees_no_gpu(backend):
    backend.create_pod(spec("no-gpu", 'echo "[${CUDA_VISIBLE_DEVICES-unset}]"', node="cpu-node-1"))
    wait_terminal(backend, "no-gpu")
    assert backend.read_log("no-gpu") == "[]\n"


def test_exit_code_1_fails(backend):
    backend.create_pod(spec("fails", "echo working; exit 1"))
    obs = wait_terminal(backend, "fails")
    assert (obs.phase, obs.exit_code, obs.signal, obs.container_reason) == ("Failed", 1, None, "Error")
    assert obs.started_at is not None and obs.finished_at >= obs.started_at


def test_a_missing_command_exits_127_and_classifies_permanent(backend):
    backend.create_pod(spec("missing", "no-such-command-for-pai --flag"))
    obs = wait_terminal(backend, "missing")
    assert obs.exit_code == 127
    assert "not found" in backend.read_log("missing", stream="stderr")
    assert classify(obs.exit_code, obs.signal, obs.reason, obs.container_reason).code == 127


def test_a_task_killed_by_sigkill_reports_137(backend):
    backend.create_pod(spec("killed", "echo before; kill -KILL $$; echo after"))
    obs = wait_terminal(backend, "killed")
    # In the sandbox, bubblewrap relays the end as a shell does (128 + N), without the signal.
    assert (obs.exit_code, obs.signal) == (137, None if backend.sandboxed else 9)
    assert backend.read_log("killed") == "before\n"
    assert classify(obs.exit_code, obs.signal, obs.reason, obs.container_reason).type == "transient"


def test_stop_sends_sigterm_first(backend):
    created = backend.create_pod(
        spec("graceful", "trap 'echo got TERM; exit 3' TERM; echo ready; sleep 30 & wait", grace_seconds=5)
    )
    wait_for(backend, "graceful", lambda o: "ready" in backend.read_log("graceful"))
    started = time.monotonic()
    assert backend.delete_pod("graceful", uid=created.uid) is True
    obs = wait_for(backend, "graceful", lambda o: o.deleted)
    assert time.monotonic() - started < 4.5  # well inside the 5 s grace period
    assert (obs.phase, obs.exit_code, obs.signal, obs.deletion_requested) == ("Failed", 3, None, True)
    assert "got TERM" in backend.read_log("graceful")
    assert [p.name for p in backend.list_pods()] == []


def test_stop_kills_after_the_grace_period_and_leaves_no_process(backend):
    backend.create_pod(
        spec(
            "stubborn",
            "trap 'echo ignoring TERM' TERM; (trap '' TERM; exec sleep 30) &"
            " while kill -0 $! 2>/dev/null; do wait $!; done",
            grace_seconds=0.4,
        )
    )
    processes = wait_for_process(backend, "stubborn", "sleep 30")
    assert any(command.endswith("while kill -0 $! 2>/dev/null; do wait $!; done") for command in processes.values())
    started = time.monotonic()
    backend.delete_pod("stubborn")
    obs = wait_for(backend, "stubborn", lambda o: o.deleted)
    assert 0.35 < time.monotonic() - started < 4
    assert (obs.exit_code, obs.signal) == (137, 9)
    assert "ignoring TERM" in backend.read_log("stubborn")
    assert not any(alive(pid) for pid in processes)


def test_background_processes_die_with_the_task(backend):
    backend.create_pod(spec("leftover", "sleep 30 & sleep 0.5"))
    processes = wait_for_process(backend, "leftover", "sleep 30")
    wait_terminal(backend, "leftover")
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(pid) for pid in processes)


def test_create_is_idempotent_and_never_runs_a_pod_twice(backend, tmp_path):
    out = tmp_path / "out"
    mount = StorageMount(name="out", claim="out", mount_path="/mnt/out", host_path=str(out))
    pod = spec("once", 'echo run >> "$PAI_STORAGE_OUT/runs"; sleep 0.2', storage_mounts=(mount,))
    first = backend.create_pod(pod)
    second = backend.create_pod(pod)
    changed = backend.create_pod(spec("once", "echo other", storage_mounts=(mount,)))
    assert first.uid == second.uid == changed.uid
    wait_terminal(backend, "once")
    assert (out / "runs").read_text() == "run\n"
    assert [e.reason for e in backend.read_events("once")].count("AlreadyExists") == 1


def test_storages_map_to_local_directories_named_in_the_environment(backend, state_dir, tmp_path):
    host = tmp_path / "shared"
    mounts = (
        StorageMount(name="team-data", claim="team-data-pvc", mount_path="/mnt/data", sub_path="alice"),
        StorageMount(name="scratch", claim="scratch", mount_path="/mnt/scratch", host_path=str(host)),
    )
    backend.create_pod(
        spec(
            "storage",
            'echo hi > "$PAI_STORAGE_TEAM_DATA/f"; echo ho > "$PAI_STORAGE_SCRATCH/g"; echo "$PAI_STORAGE_MOUNTS"',
            storage_mounts=mounts,
        )
    )
    assert wait_terminal(backend, "storage").exit_code == 0, backend.read_log("storage")
    mapping = json.loads(backend.read_log("storage"))
    data = state_dir / "storage" / "team-data-pvc" / "alice"
    if backend.sandboxed:
        # The sandbox mounts each storage where the job file says.
        assert mapping == {"/mnt/data": "/mnt/data", "/mnt/scratch": "/mnt/scratch"}
    else:
        assert mapping == {"/mnt/data": str(data), "/mnt/scratch": str(host)}
    assert (data / "f").read_text() == "hi\n"
    assert (host / "g").read_text() == "ho\n"


def test_a_host_path_storage_is_its_directory_whatever_its_sub_path(backend, tmp_path):
    # A host path already is the storage's directory (launch folds the sub-path in), as
    # on Kubernetes, where a host-path volume gets no subPath.
    host = tmp_path / "team" / "home" / "carol"
    mount = StorageMount(name="home", claim="home", mount_path="/mnt/home", sub_path="home/carol", host_path=str(host))
    backend.create_pod(spec("host-home", 'echo mine > "$PAI_STORAGE_HOME/f"', storage_mounts=(mount,)))
    assert wait_terminal(backend, "host-home").exit_code == 0, backend.read_log("host-home")
    assert (host / "f").read_text() == "mine\n"
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("f"))] == ["team/home/carol/f"]


@pytest.mark.parametrize(
    ("pod", "field"),
    [
        (spec("Bad_Name", "true"), "name"),
        (spec("nowhere", "true", node="no-such-node"), "node"),
        (spec("too-many", "true", devices=(4,)), "devices"),
        (spec("twice", "true", devices=(1, 1)), "devices"),
        (spec("empty", "  \n"), "commands"),
        (spec("env-int", "true", env={"N": 1}), "env"),
        (spec("env-key", "true", env={"A=B": "1"}), "env"),
        (spec("escape", "true", storage_mounts=(StorageMount("s", "s", "/mnt/s", sub_path="../x"),)), "storage s"),
        (spec("secret-path", "true", secrets={"../x": "v"}), "secrets"),
        (spec("secret-dots", "true", secrets={"..data": "v"}), "secrets"),
        (spec("secret-text", "true", secrets={"n": 1}), "secrets"),
    ],
)
def test_invalid_specs_are_permanent_creation_errors(backend, pod, field):
    with pytest.raises(PermanentCreationError, match=field):
        backend.create_pod(pod)
    assert backend.list_pods() == []


def test_delete_checks_the_uid_and_ignores_unknown_pods(backend):
    created = backend.create_pod(spec("guarded", "sleep 30"))
    wait_for(backend, "guarded", lambda o: o.phase == "Running")
    with pytest.raises(PodConflictError):
        backend.delete_pod("guarded", uid="someone-else")
    assert [p.name for p in backend.list_pods()] == ["guarded"]
    assert backend.delete_pod("nobody") is False
    assert backend.delete_pod("guarded", uid=created.uid, grace_seconds=0) is True
    assert wait_for(backend, "guarded", lambda o: o.deleted).exit_code == 137
    assert backend.delete_pod("guarded") is False


def test_a_deleted_name_can_be_created_again_as_a_new_pod(backend):
    first = backend.create_pod(spec("again", "echo one"))
    wait_terminal(backend, "again")
    backend.delete_pod("again")
    second = backend.create_pod(spec("again", "echo two"))
    assert second.uid != first.uid
    wait_for(backend, "again", lambda o: o.uid == second.uid and o.terminal)
    assert backend.read_log("again") == "two\n"


def test_list_pods_selects_by_labels(backend):
    backend.create_pod(spec("a-0", "sleep 30", labels=pod_labels("job-a", "worker", 0, 0, 0)))
    backend.create_pod(spec("a-1", "sleep 30", labels=pod_labels("job-a", "worker", 1, 0, 0)))
    backend.create_pod(spec("b-0", "sleep 30", labels=pod_labels("job-b", "worker", 0, 0, 0)))
    assert [p.name for p in backend.list_pods({"pai.job": "job-a"})] == ["a-0", "a-1"]
    assert [p.name for p in backend.list_pods({"pai.job": "job-a", "pai.task-index": "1"})] == ["a-1"]
    assert [p.name for p in backend.list_pods()] == ["a-0", "a-1", "b-0"]
    assert backend.list_pods({"pai.job": "job-a"})[0].labels["pai.taskrole"] == "worker"


def test_the_change_feed_reports_each_change_once(backend):
    created = backend.create_pod(spec("feed", "sleep 0.3; exit 4"))
    cursor = created.resource_version
    phases = []
    deadline = time.monotonic() + 5
    while not phases or phases[-1] != "Failed":
        for obs in backend.poll(cursor):
            phases.append(obs.phase)
            cursor = obs.resource_version
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert phases == ["Running", "Failed"]
    assert backend.poll(cursor) == []
    backend.delete_pod("feed")
    changes = backend.poll(cursor)
    assert [(o.name, o.deleted, o.exit_code) for o in changes] == [("feed", True, 4)]
    assert backend.poll(changes[-1].resource_version) == []
    assert backend.poll(None) == []  # a relist shows live pods only


def test_a_relist_with_the_cursor_taken_before_it_misses_nothing(backend):
    backend.create_pod(spec("before", "sleep 30"))
    wait_for(backend, "before", lambda o: o.phase == "Running")
    cursor = backend.cursor()
    assert [o.name for o in backend.poll(None)] == ["before"]
    assert backend.poll(cursor) == []
    backend.create_pod(spec("after", "sleep 30"))
    assert "after" in [o.name for o in backend.poll(cursor)]


def test_a_bad_cursor_asks_for_a_relist(backend):
    with pytest.raises(CursorExpiredError):
        backend.poll("not-a-number")
    with pytest.raises(CursorExpiredError):
        backend.poll("999999")


def test_logs_stay_readable_after_the_end_with_streams_and_tail(backend):
    backend.create_pod(spec("logs", 'for i in $(seq 1 500); do echo "line $i"; done; echo oops >&2'))
    wait_terminal(backend, "logs")
    backend.delete_pod("logs")
    wait_for(backend, "logs", lambda o: o.deleted)
    stdout = backend.read_log("logs", stream="stdout")
    assert stdout.splitlines()[0] == "line 1" and len(stdout.splitlines()) == 500
    assert backend.read_log("logs", stream="stderr") == "oops\n"
    assert backend.read_log("logs").endswith("line 500\noops\n")
    assert backend.read_log("logs", tail_lines=2) == "line 500\noops\n"
    assert backend.read_log("logs", tail_lines=3, stream="stdout") == "line 498\nline 499\nline 500\n"
    assert backend.read_log("logs", tail_lines=10000, stream="stdout") == stdout
    assert backend.read_log("logs", tail_lines=0) == ""
    with pytest.raises(PodNotFoundError):
        backend.read_log("never-was")
    backend.forget_pod("logs")
    with pytest.raises(PodNotFoundError):
        backend.read_log("logs")


def test_a_live_pod_cannot_be_forgotten(backend):
    backend.create_pod(spec("live", "sleep 30"))
    with pytest.raises(PodConflictError):
        backend.forget_pod("live")


def test_events_tell_the_pods_story(backend):
    backend.create_pod(spec("story", "sleep 30", grace_seconds=0.2))
    wait_for(backend, "story", lambda o: o.phase == "Running")
    backend.delete_pod("story")
    wait_for(backend, "story", lambda o: o.deleted)
    events = backend.read_events("story")
    assert [e.reason for e in events] == ["Scheduled", "Started", "Killing", "Failed"]
    assert events[-1].type == "Warning" and "143" in events[-1].message
    assert backend.read_events("unknown") == []


def test_deleting_right_after_creating_never_loses_the_stop(backend):
    for i in range(5):
        backend.create_pod(spec(f"quick-{i}", "sleep 30", grace_seconds=0.2))
        backend.delete_pod(f"quick-{i}")
    for i in range(5):
        obs = wait_for(backend, f"quick-{i}", lambda o: o.deleted)
        # Stopped before its task started (no exit code), or by SIGTERM once it had.
        assert obs.phase == "Failed" and obs.exit_code in (None, 143)
