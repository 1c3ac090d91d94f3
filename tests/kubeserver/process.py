"""The API test server in a process of its own, for benchmarks: what it costs (its handler
threads, its kubelet) is not counted as the client's.

    with ServerProcess() as server:       # starts the process, which starts a KubeServer
        server.call("add_nodes", 1000, prefix="node-")
        server.write_kubeconfig(path)
        server.kubelet("run", namespace)   # a kubelet thread in the server process
        server.stats()                     # requests by kind, and the process's CPU seconds

``call(hook, *args, **kwargs)`` runs any hook of :class:`~tests.kubeserver.server.KubeServer`
in the server process and returns its (picklable) answer; an exception there is raised
here as :class:`ServerProcessError` with its text.

The kubelet (``kubelet(mode, namespace)``) is a thread of the server process that keeps
playing the nodes until ``kubelet("stop")``: ``run`` starts every pod of the namespace
that waits (bound, Pending, not being deleted), ``finish`` ends every running pod with
exit code 0 (and starts those still waiting, to end them too), and both finalize the
deletions of pods being deleted, as a kubelet does once their containers stopped. It
records the wall time (``time.time()``) of its first and last pod change and how many it
made, in ``stats()["kubelet"]``.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback
from collections import Counter
from urllib.parse import parse_qs, urlsplit


class ServerProcessError(RuntimeError):
    pass


def call_kind(method: str, path: str, query: dict) -> str:
    """A request as "METHOD resource", namespaces and names left out (WATCH for a watch, LIST
    for a GET of a collection)."""
    parts = [p for p in path.split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    kind = parts[0] if parts else path
    if len(parts) > 2:
        kind += f"/{parts[2]}"
    if query.get("watch") in (["true"], ["1"]):
        method = "WATCH"
    elif method == "GET" and len(parts) == 1:
        method = "LIST"
    return f"{method} {kind}"


class _Meter:
    """Counts the requests the server answers, by kind."""

    def __init__(self, server):
        self.calls = Counter()
        self._lock = threading.Lock()
        handle = server.handle

        def metered(handler, method):
            url = urlsplit(handler.path)
            kind = call_kind(method, url.path, parse_qs(url.query))
            with self._lock:
                self.calls[kind] += 1
            handle(handler, method)

        server.handle = metered

    def take(self) -> dict:
        with self._lock:
            taken, self.calls = dict(self.calls), Counter()
        return taken


FULL_LOOK_EVERY = 5.0  # seconds


class _Kubelet:
    """Plays every node: see the module docstring."""

    def __init__(self, server):
        self.server = server
        self.mode, self.namespace = None, None
        self._stop = threading.Event()
        self._thread = None
        self.first = self.last = None
        self.changes = 0
        self.cpu = 0.0

    def start(self, mode, namespace):
        self.stop()
        self.mode, self.namespace = mode, namespace
        self.first = self.last = None
        self.changes, self.cpu = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _changed(self):
        now = time.time()
        self.first = self.first or now
        self.last = now
        self.changes += 1

    def _run(self):
        """A full look at the namespace's pods, then only at the pods changed since the last
        look (from the server's change history, as a real kubelet's watch would tell it):
        at 10,000 running pods, re-reading them all for each new one cost more than pai."""
        started = time.thread_time()
        cursor, full_at = None, 0.0
        while not self._stop.is_set():
            busy = False
            with self.server._cond:
                store = self.server._objects["pods"]
                history = self.server._history
                # A full look every few seconds too: a pod that could not start then (its
                # secret missing) may start now without having changed.
                if cursor is None or cursor < self.server._compacted_rv or time.monotonic() - full_at > FULL_LOOK_EVERY:
                    keys, full_at = list(store), time.monotonic()
                else:
                    changed = history[cursor - self.server._compacted_rv:]
                    keys = list(dict.fromkeys(self.server._key(e.resource, e.obj["metadata"].get("namespace"),
                                                                   e.obj["metadata"]["name"])
                                              for e in changed if e.resource.plural == "pods"))
                cursor = self.server._rv
                # A look at the store without copying every pod (the hooks copy what they change).
                pods = []
                for key in keys:
                    obj = store.get(key)
                    if obj is None or (self.namespace is not None and key[0] != self.namespace):
                        continue
                    pods.append((key, (obj.get("status") or {}).get("phase"),
                                 bool(obj["metadata"].get("deletionTimestamp")), bool(obj["spec"].get("nodeName"))))
            for (namespace, name), phase, deleting, bound in pods:
                try:
                    busy |= self._step(namespace, name, phase, deleting, bound)
                except Exception:  # the pod went meanwhile (pai deleted it): nothing to play
                    continue
            self.cpu = time.thread_time() - started
            if not busy:
                with self.server._cond:
                    if self.server._rv == cursor:
                        self.server._cond.wait(0.1)

    def _step(self, namespace, name, phase, deleting, bound):
        busy = False
        if deleting:
            if phase not in ("Succeeded", "Failed"):
                self.server.finalize_deletion(namespace, name)
                busy = True
            return busy
        if phase == "Pending" and bound:
            if self.server.run_pod(namespace, name) is None:
                return busy
            self._changed()
            busy = True
            phase = "Running"
        if phase == "Running" and self.mode == "finish":
            self.server.finish_pod(namespace, name, 0)
            self._changed()
            busy = True
        return busy

    def stats(self):
        return {"mode": self.mode, "first": self.first, "last": self.last, "changes": self.changes, "cpu": self.cpu}


def _serve(conn, server_args):
    from .server import KubeServer

    server = KubeServer(**server_args).start()
    meter = _Meter(server)
    kubelet = _Kubelet(server)
    conn.send(server.host)
    try:
        while True:
            try:
                name, args, kwargs = conn.recv()
            except EOFError:
                return
            try:
                if name == "stop":
                    conn.send(("ok", None))
                    return
                if name == "kubelet":
                    if args[0] == "stop":
                        kubelet.stop()
                    else:
                        kubelet.start(*args)
                    result = None
                elif name == "stats":
                    result = {
                        "calls": meter.take(), "cpu": time.process_time(), "kubelet": kubelet.stats(),
                        "internal_errors": list(server.internal_errors),
                    }
                elif name == "count":
                    result = len(server.list_objects(*args, **kwargs))
                else:
                    result = getattr(server, name)(*args, **kwargs)
                conn.send(("ok", result))
            except Exception as exc:  # answered to the caller, the server goes on
                conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        kubelet.stop()
        server.stop()


class ServerProcess:
    """See the module docstring. ``server_args`` go to :class:`KubeServer`."""

    def __init__(self, **server_args):
        self.server_args = server_args
        self.process = None
        self.host = None
        self._conn = None
        self._lock = threading.Lock()

    def start(self):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, self.server_args), name="kube-api-test-server",
                                       daemon=True)
        self.process.start()
        child.close()
        if not self._conn.poll(60):
            raise ServerProcessError("the API test server process did not start")
        self.host = self._conn.recv()
        return self

    def call(self, name, *args, **kwargs):
        with self._lock:
            self._conn.send((name, args, kwargs))
            status, result = self._conn.recv()
        if status != "ok":
            raise ServerProcessError(result)
        return result

    def write_kubeconfig(self, path, **kwargs):
        return self.call("write_kubeconfig", str(path), **kwargs)

    def kubelet(self, mode, namespace=None):
        self.call("kubelet", mode, namespace)

    def stats(self):
        return self.call("stats")

    def stop(self):
        if self.process is None:
            return
        try:
            self.call("stop")
        except (EOFError, OSError, ServerProcessError):
            pass
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self._conn.close()
        self.process = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
