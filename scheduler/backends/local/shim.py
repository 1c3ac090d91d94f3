"""The supervisor of one local pod: ``python -I -S shim.py <pod_dir>``.

It stays alive as long as the task, so that the task's exit status is recorded even
when no worker is running (worker restarts must not lose exit codes), and it owns the
stop sequence (SIGTERM to the task's process group, SIGKILL after the grace period) so
a stop completes even if the worker dies in the middle of it.

Files in ``pod_dir`` (JSON written to a temporary name, then renamed):
- reads ``launch.json`` (shell, script, env, cwd, grace_seconds, and ``sandbox``: the
  command that runs the shell in the task's sandbox, see ``sandbox.py``) and
  ``deletion.json`` (a stop request: grace_seconds);
- writes ``process.json`` once the task is forked (its own and the task's pid and
  process start time, and the boot id, so nobody adopts a recycled pid), the logs
  ``stdout.log``, ``stderr.log`` and ``all.log`` (both streams interleaved as read),
  and ``exit.json`` last (exit_code as Kubernetes reports it: the status, or 128 + N
  for signal N; ``signal``; ``started``: false when stopped before the task started).

The worker starts it in a new session with SIGTERM blocked; it installs its handler
before unblocking, so an early stop request is never lost. Standard library only: it
runs isolated from the project's environment.
"""

import json
import os
import selectors
import signal
import sys
import time

# After the task's main process exits, output its leftovers may still write is read
# for this long at most (a daemonised grandchild could hold the pipe forever).
DRAIN_SECONDS = 2.0
# While a sandbox is being set up its processes ignore SIGTERM (see exec_task): a stop
# then waits for the task to run, checking this often.
TERM_RETRY_SECONDS = 0.02
CHILD_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGCHLD, signal.SIGXFSZ)


def write_json(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def process_start(pid):
    """The process's start time in clock ticks since boot (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def exec_task(launch, out_w, err_w):
    """In the forked child: become a process group of its own and exec the shell (in its sandbox)."""
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig in CHILD_DEFAULT_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.chdir(launch["cwd"])
        argv = [launch["shell"], "-c", launch["script"]]
        sandbox = launch.get("sandbox")
        if sandbox:
            # bubblewrap waits for the task as its parent: a stop's SIGTERM to the group
            # must not end it before the task. The sandbox gives the task the default back.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            argv = sandbox + argv
        os.execve(argv[0], argv, launch["env"])
    except BaseException as exc:  # noqa: BLE001 - the child must never return into the shim
        os.write(2, f"pai: cannot start the task: {exc}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def task_takes_sigterm(pgid):
    """Whether a process of the group other than its leader (bubblewrap) would act on
    SIGTERM: in a sandbox, whether the task runs yet."""
    term = 1 << (signal.SIGTERM - 1)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pgid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) != pgid or fields[0] in "ZX":
            continue
        ignored = next((line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), "0")
        if not int(ignored, 16) & term:
            return True
    return False


def kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(pod_dir):
    def path(name):
        return os.path.join(pod_dir, name)

    launch = read_json(path("launch.json"))
    stop = {"requested": False}

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    if os.path.exists(path("deletion.json")):
        write_json(path("exit.json"), {"exit_code": None, "signal": None, "started": False, "finished_at": time.time()})
        return

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    child = os.fork()
    if child == 0:
        exec_task(launch, out_w, err_w)
    try:
        os.setpgid(child, child)
    except (PermissionError, ProcessLookupError):
        pass  # the child already exec'd (its own setpgid ran first) or exited
    os.close(out_w)
    os.close(err_w)
    started_at = time.time()
    write_json(
        path("process.json"),
        {
            "boot_id": boot_id(),
            "shim_pid": os.getpid(),
            "shim_start": process_start(os.getpid()),
            "pid": child,
            "start": process_start(child),
            "started_at": started_at,
        },
    )
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGCHLD])

    all_log = open(path("all.log"), "ab", buffering=0)
    logs = {out_r: open(path("stdout.log"), "ab", buffering=0), err_r: open(path("stderr.log"), "ab", buffering=0)}
    selector = selectors.DefaultSelector()
    selector.register(wake_r, selectors.EVENT_READ)
    for fd in logs:
        selector.register(fd, selectors.EVENT_READ)

    status = None
    grace = None
    term_sent = False
    term_retry_at = None
    kill_at = None
    drain_until = None
    while True:
        now = time.monotonic()
        if status is None:
            pid, waited = os.waitpid(child, os.WNOHANG)
            if pid:
                status = waited
                # Like a container: when the main process ends, whatever it left behind goes.
                kill_group(child, signal.SIGKILL)
                drain_until = now + DRAIN_SECONDS
        if status is None and stop["requested"] and grace is None:
            grace = float((read_json(path("deletion.json")) or {}).get("grace_seconds", launch["grace_seconds"]))
            if grace > 0:
                kill_at = now + grace
            else:
                # No grace period is a forced stop: SIGKILL straight away, as Kubernetes does.
                kill_group(child, signal.SIGKILL)
        if status is None and grace and not term_sent:
            # Sent once, when the task can act on it: a task's SIGTERM handler runs once.
            if not launch.get("sandbox") or task_takes_sigterm(child):
                kill_group(child, signal.SIGTERM)
                term_sent = True
                term_retry_at = None
            else:
                term_retry_at = now + TERM_RETRY_SECONDS
        if status is None and kill_at is not None and now >= kill_at:
            kill_group(child, signal.SIGKILL)
            kill_at = None
        if status is not None and (not logs or now >= drain_until):
            break
        deadlines = [t for t in (kill_at, drain_until, term_retry_at) if t is not None]
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in selector.select(timeout):
            if key.fd == wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                continue
            data = os.read(key.fd, 65536)
            if data:
                logs[key.fd].write(data)
                all_log.write(data)
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
                logs.pop(key.fd).close()

    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        result = {"exit_code": 128 + sig, "signal": sig}
    else:
        result = {"exit_code": os.WEXITSTATUS(status), "signal": None}
    result.update(started=True, started_at=started_at, finished_at=time.time())
    write_json(path("exit.json"), result)


if __name__ == "__main__":
    main(sys.argv[1])
