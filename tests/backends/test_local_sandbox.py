"""The local backend's sandbox: what a task sees and may do, one uid per tenant; and,
where no sandbox can be had, one tenant only.

The sandbox's own tests need root (CI runs as root; see ``require_sandbox``); the
fallback's run anywhere. Stops, exit codes, logs and restarts in the sandbox are the
``sandboxed`` half of test_local_backend.py and test_local_restart.py.
"""

import logging
import os
import shutil
import stat
import tempfile
import time

import pytest

from scheduler.backends import PermanentCreationError, PodSpec, StorageMount
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.sandbox import DEFAULT_UID_BASE, Isolation

from .conftest import NODES, alive, require_sandbox, wait_for, wait_terminal


def spec(name, commands, namespace="pai-team-a", **kwargs):
    return PodSpec(name=name, node="gpu-node-1", commands=commands, namespace=namespace, **kwargs)


def run(backend, pod, timeout=10.0):
    """Run a pod to its end; its exit code and log."""
    backend.create_pod(pod)
    obs = wait_terminal(backend, pod.name, timeout)
    return obs.exit_code, backend.read_log(pod.name)


@pytest.fixture
def sandboxed(state_dir):
    require_sandbox()
    b = LocalBackend(state_dir, NODES, isolation=Isolation(mode="required"))
    yield b
    for pod in b.list_pods():
        b.delete_pod(pod.name, grace_seconds=0)
    b.close()


def test_each_tenant_runs_as_a_uid_of_its_own_and_keeps_it(sandboxed, state_dir):
    show = 'echo "$(id -u) $(id -g) $(id -un) $USER $HOME"; touch "$HOME/mine"'
    seen = {}
    for name, namespace in (("a-1", "pai-team-a"), ("a-2", "pai-team-a"), ("b-1", "pai-team-b")):
        code, log = run(sandboxed, spec(name, show, namespace))
        assert code == 0, log
        uid, gid, user, env_user, home = log.split()
        assert uid == gid and user == env_user == namespace and home.endswith(f"/pods/{name}/work")
        assert os.stat(state_dir / "pods" / name / "work" / "mine").st_uid == int(uid)
        seen[name] = int(uid)
    assert seen["a-1"] == seen["a-2"] != seen["b-1"]
    assert min(seen.values()) >= DEFAULT_UID_BASE
    # Another worker over the same data gives the tenant the same uid.
    again = LocalBackend(state_dir, NODES, isolation=Isolation(mode="required"))
    code, log = run(again, spec("a-3", "id -u"))
    assert int(log) == seen["a-1"]


def test_a_task_sees_the_system_its_own_directories_and_nothing_else(sandboxed, state_dir, tmp_path):
    sandboxed.create_pod(spec("neighbour", "sleep 30", secrets={"token": "neighbour-secret"}))
    wait_for(sandboxed, "neighbour", lambda o: o.phase == "Running")
    host = tmp_path / "data"
    pod = spec(
        "looker",
        'ls /; echo "--"; ls "$(dirname "$PWD")"; echo "--"; ls "$(dirname "$(dirname "$PWD")")"; echo "--";'
        " ls /proc | grep -c '^[0-9]'; ls /mnt",
        storage_mounts=(StorageMount("data", "data", "/mnt/data", host_path=str(host)),),
        secrets={"mine": "looker-secret"},
    )
    code, log = run(sandboxed, pod)
    assert code == 0, log
    root, pod_dir, pods, rest = log.split("--\n")
    top = {e.lstrip("/") for e in ("/usr", "/etc", "/opt", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")}
    expected = {e for e in top if os.path.lexists(f"/{e}")} | {"dev", "proc", "tmp", "mnt"}
    if os.path.isdir("/run/systemd/resolve"):
        expected.add("run")
    assert set(root.split()) == expected
    assert pod_dir.split() == ["secrets", "work"]  # its own pod directory, without its logs and records
    assert pods.split() == ["looker"]  # no other pod
    count, mounts = rest.split("\n", 1)
    assert int(count) <= 4  # bubblewrap's init, the shell, ls and grep: none of the host's
    assert mounts.split() == ["data"]


def test_pai_directories_are_hidden_even_inside_a_system_directory(state_dir):
    require_sandbox()
    try:
        data = tempfile.mkdtemp(prefix="pai-test-data-", dir="/opt")
    except OSError as exc:
        pytest.fail(f"as root, /opt must be writable for this test: {exc}")
    try:
        with open(os.path.join(data, "pai.sqlite3"), "w") as f:
            f.write("the database")
        backend = LocalBackend(state_dir, NODES, isolation=Isolation(mode="required", hidden=(data,)))
        code, log = run(backend, spec("opt", f'ls -A /opt | grep -c . ; ls -A {data} | wc -l; cat {data}/pai.sqlite3'))
        shown, inside = backend.read_log("opt", stream="stdout").split()
        assert int(shown) == len(os.listdir("/opt"))  # /opt is shown ...
        assert int(inside) == 0  # ... but pai's directory in it is empty
        assert "No such file" in backend.read_log("opt", stream="stderr") and "the database" not in log
    finally:
        shutil.rmtree(data)


def test_read_only_storages_and_secrets_cannot_be_changed(sandboxed, tmp_path):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    (ro / "given").write_text("shared data\n")
    mounts = (
        StorageMount("ro", "ro", "/mnt/ro", read_only=True, host_path=str(ro)),
        StorageMount("rw", "rw", "/mnt/rw", host_path=str(rw)),
    )
    script = (
        "cat /mnt/ro/given; echo x > /mnt/ro/new || echo ro-refused; "
        'cat "$PAI_SECRETS_DIR/token"; echo; rm -f "$PAI_SECRETS_DIR/token" || echo secret-kept; '
        "echo written > /mnt/rw/out"
    )
    code, log = run(sandboxed, spec("storage", script, storage_mounts=mounts, secrets={"token": "t0k"}))
    assert code == 0, log
    assert sandboxed.read_log("storage", stream="stdout") == "shared data\nro-refused\nt0k\nsecret-kept\n"
    errors = sandboxed.read_log("storage", stream="stderr").splitlines()
    assert len(errors) == 2 and all(line.endswith("Read-only file system") for line in errors), errors
    assert not (ro / "new").exists()
    assert (rw / "out").read_text() == "written\n"
    # The directory the backend made for the storage, and what the task wrote, are the tenant's.
    assert os.stat(rw).st_uid == os.stat(rw / "out").st_uid >= DEFAULT_UID_BASE


def test_the_task_has_no_privileges_and_a_shm_of_its_size(sandboxed):
    script = "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; stat -f -c 'shm %b %S' /dev/shm; su -c true root"
    code, _ = run(sandboxed, spec("privs", script, shm_mb=64))
    log = sandboxed.read_log("privs", stream="stdout")
    assert "CapEff:\t0000000000000000" in log and "CapBnd:\t0000000000000000" in log
    assert "NoNewPrivs:\t1" in log
    blocks, size = (int(v) for v in log.split("shm ")[1].split()[:2])
    assert blocks * size == 64 * 1024 * 1024
    assert code != 0  # su could not become root


def test_a_process_that_leaves_the_tasks_session_still_ends_with_the_task(sandboxed):
    # Outside the sandbox such a process would escape the process group the supervisor kills.
    sandboxed.create_pod(spec("escaper", 'setsid sleep 30 & readlink /proc/self/ns/pid; sleep 0.5'))
    wait_for(sandboxed, "escaper", lambda o: "pid:" in sandboxed.read_log("escaper"))
    namespace = sandboxed.read_log("escaper").strip()

    def in_namespace():
        found = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace and alive(entry):
                    found.append(entry)
            except OSError:
                continue
        return found

    assert in_namespace()  # the escaped sleep, while the task runs
    wait_terminal(sandboxed, "escaper")
    deadline = time.monotonic() + 2
    while in_namespace() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert in_namespace() == []


def test_the_gpu_device_nodes_reach_the_task(state_dir, tmp_path):
    require_sandbox()
    device = tmp_path / "nvidia0"
    os.mknod(device, stat.S_IFCHR, os.makedev(1, 3))  # behaves as /dev/null
    device.chmod(0o666)
    backend = LocalBackend(state_dir, NODES, isolation=Isolation(mode="required", devices=(str(tmp_path / "nvidia*"),)))
    code, log = run(backend, spec("gpu", f"test -c {device} && echo through > {device} && echo usable"))
    assert (code, log) == (0, "usable\n")


@pytest.mark.parametrize(
    ("mount_path", "why"),
    [
        ("/usr/data", "inside /usr"),
        ("/proc/x", "inside /proc"),
        ("/", "every task needs"),
        ("/tmp", "every task needs"),
        ("relative", "absolute"),
        ("/mnt/../etc", "'..'"),
    ],
)
def test_a_mount_path_the_sandbox_needs_is_refused(sandboxed, mount_path, why):
    mounts = (StorageMount("s", "s", mount_path),)
    with pytest.raises(PermanentCreationError, match=f"storage s: .*{why}"):
        sandboxed.create_pod(spec("bad-mount", "true", storage_mounts=mounts))


def test_two_storages_on_one_path_or_over_pai_files_are_refused(sandboxed, state_dir):
    twice = (StorageMount("s", "s", "/mnt/x"), StorageMount("t", "t", "/mnt/x/"))
    with pytest.raises(PermanentCreationError, match="storage t: another storage is mounted at /mnt/x"):
        sandboxed.create_pod(spec("twice", "true", storage_mounts=twice))
    over = (StorageMount("s", "s", "/mnt/x", host_path=str(state_dir.parent)),)
    with pytest.raises(PermanentCreationError, match="holds pai's own files"):
        sandboxed.create_pod(spec("over", "true", storage_mounts=over))
    shadow = (StorageMount("s", "s", str(state_dir / "pods")),)
    with pytest.raises(PermanentCreationError, match="overlaps pai's own directory"):
        sandboxed.create_pod(spec("shadow", "true", storage_mounts=shadow))


def test_a_link_a_task_made_does_not_redirect_a_storage(sandboxed, tmp_path):
    home = tmp_path / "home"
    mount = StorageMount("home", "home", "/mnt/home", host_path=str(home))
    code, log = run(sandboxed, spec("plant", "ln -s /etc /mnt/home/dave", storage_mounts=(mount,)))
    assert code == 0, log
    redirected = StorageMount("home", "home", "/mnt/home", host_path=str(home / "dave"))
    with pytest.raises(PermanentCreationError, match="symbolic link a task made"):
        sandboxed.create_pod(spec("victim", "true", storage_mounts=(redirected,)))


# -- without a sandbox -------------------------------------------------------------------


def unavailable(**kwargs):
    return Isolation(bwrap="/nonexistent/bwrap", **kwargs)


def test_without_a_sandbox_only_the_first_tenant_runs_and_says_so(state_dir, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    registry = tmp_path / "data"
    backend = LocalBackend(state_dir, NODES, isolation=unavailable(mode="auto", registry_dir=registry))
    assert not backend.sandboxed and backend.unsandboxed_reason
    assert f"tasks cannot run sandboxed ({backend.unsandboxed_reason})" in caplog.text
    code, log = run(backend, spec("first", "id -u"))
    assert (code, int(log)) == (0, os.getuid())  # as the worker's user
    with pytest.raises(PermanentCreationError, match="namespace pai-team-b: tasks cannot run sandboxed .*only one tenant's"
                       " tasks run here .*and they are pai-team-a's"):
        backend.create_pod(spec("second", "true", namespace="pai-team-b"))
    # The claim is the data directory's: another local cluster over it refuses too.
    other = LocalBackend(tmp_path / "other-cluster", NODES, isolation=unavailable(mode="auto", registry_dir=registry))
    with pytest.raises(PermanentCreationError, match="pai-team-a's"):
        other.create_pod(spec("third", "true", namespace="pai-team-b"))
    assert run(other, spec("fourth", "true"))[0] == 0


def test_required_runs_nothing_without_a_sandbox(state_dir):
    backend = LocalBackend(state_dir, NODES, isolation=unavailable(mode="required"))
    with pytest.raises(PermanentCreationError, match="tasks must run sandboxed, and cannot"):
        backend.create_pod(spec("any", "true"))
    assert backend.list_pods() == []


def test_off_runs_every_tenant_unisolated(state_dir):
    backend = LocalBackend(state_dir, NODES, isolation=Isolation(mode="off"))
    assert not backend.sandboxed
    for name, namespace in (("a", "pai-team-a"), ("b", "pai-team-b")):
        code, log = run(backend, spec(name, "id -u", namespace))
        assert (code, int(log)) == (0, os.getuid())
