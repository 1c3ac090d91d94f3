"""The worker and the Kubernetes backend together, on PostgreSQL, at 10,000 pods.

pai's real worker (the controller of apps/jobs/worker with the real scheduling engine)
drives the real Kubernetes backend over HTTP against the Kubernetes API test server
(tests/kubeserver), which the benchmark reaches through a kubeconfig file as a Cluster
row would. The test server's kubelet hooks, called in-process, play the nodes.

1. Pod creation: jobs of 4 one-GPU pods are submitted to a cluster of as many 8-GPU
   nodes as they need; one controller cycle places them all and creates their pods.
   The figure is pods created per second of `create_missing_pods` (placement is timed
   apart), with the API calls the server answered and the CPU time it spent on them.
2. Pod state changes: a kubelet thread starts every pod (Pending→Running) while the
   controller cycles until every job is RUNNING, then ends every pod with exit code 0
   (Running→Succeeded) while it cycles until every job is SUCCEEDED. The figure is
   state changes applied (task attempts, attempts and jobs written to PostgreSQL,
   jobs completed) per second of wall time, from the kubelet's first write to the
   last job completed (target ≥ 2,000/s), with the kubelet's own rate beside it, and
   then bench_worker.py's in-memory figure, measured in the same process on the same
   database, and the ratio of the two.
3. Peak RSS of the process (which holds the API server too) and queries per cycle.

Sizes: `BENCH_K8S_WORKER_JOBS` × `BENCH_K8S_WORKER_PODS_PER_JOB` (500 × 4). The scale
this benchmark is for is 10,000 pods (`BENCH_K8S_WORKER_JOBS=2500`), but that run
takes over an hour and a half on 2 cores, not minutes: the controller reads each
observed pod's events with one API call, and the test server answers such a list, and
admits each pod against the tenant's priority-scoped quota, by scanning every event or
pod it holds, so the time grows with the square of the pods. The default keeps
`make bench` within minutes.

The worker's client is rate limited by the Cluster's `api_qps` / `api_burst` (defaults
100/200); the benchmark measures pai, not the limiter, so it lifts the limit
unless `BENCH_K8S_WORKER_QPS` sets one, and prints how long the same calls would take
at 100 a second. `BENCH_K8S_WORKER_COMPARE=0` skips the in-memory comparison;
`BENCH_K8S_WORKER_TIMEOUT` (900 s) bounds each phase.

The database is dedicated and re-created each run: `BENCH_DATABASE_URL`, else the
server of `DATABASE_URL` (default 127.0.0.1:5432, user postgres) with database
`pai_bench_k8s_worker`. Run: `make bench` or `.venv/bin/python benchmarks/bench_kubernetes_worker.py`.
"""

import os
import pathlib
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from urllib.parse import parse_qs, urlsplit

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402
from benchmarks.worker_setup import build_cluster, build_team, job_text, setup_django  # noqa: E402

JOBS = int(os.environ.get("BENCH_K8S_WORKER_JOBS", "500"))
PODS_PER_JOB = int(os.environ.get("BENCH_K8S_WORKER_PODS_PER_JOB", "4"))
PODS = JOBS * PODS_PER_JOB
NODES = -(-PODS // 8)
QPS = os.environ.get("BENCH_K8S_WORKER_QPS", "1000000")
COMPARE = os.environ.get("BENCH_K8S_WORKER_COMPARE", "1") != "0"
# A phase that has not ended by then is reported as stuck (the benchmark fails).
PHASE_TIMEOUT = float(os.environ.get("BENCH_K8S_WORKER_TIMEOUT", "900"))
TARGET = 2000
PRODUCTION_QPS = 100  # Cluster.api_qps's default


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class QueryCounter:
    """Counts the SQL statements of the main thread's connection (the controller's)."""

    def __init__(self):
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def call_kind(method, path, query):
    """A request as "METHOD resource", namespaces and names left out (WATCH for a watch)."""
    parts = [p for p in path.split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    kind = parts[0] if parts else path
    if len(parts) > 2:
        kind += f"/{parts[2]}"
    return f"{'WATCH' if query.get('watch') in (['true'], ['1']) else method} {kind}"


class ApiMeter:
    """The requests the test server answers, by kind, and the CPU time its handler threads
    spend on them (watches are counted, not timed: they last the whole run)."""

    def __init__(self, server):
        self.calls, self.cpu = Counter(), Counter()
        self._lock = threading.Lock()
        handle = server.handle

        def metered(handler, method):
            url = urlsplit(handler.path)
            kind = call_kind(method, url.path, parse_qs(url.query))
            started = time.thread_time()
            try:
                handle(handler, method)
            finally:
                with self._lock:
                    self.calls[kind] += 1
                    if not kind.startswith("WATCH"):
                        self.cpu[kind] += time.thread_time() - started

        server.handle = metered

    def take(self):
        """(calls, CPU seconds) since the last take."""
        with self._lock:
            taken = self.calls, self.cpu
            self.calls, self.cpu = Counter(), Counter()
        return taken


def describe_calls(calls, cpu):
    listed = ", ".join(f"{n:,} {kind}" for kind, n in calls.most_common())
    heaviest = max(cpu, key=cpu.get, default=None)
    limited = sum(n for kind, n in calls.items() if not kind.startswith("WATCH")) / PRODUCTION_QPS
    text = (f"{sum(calls.values()):,} ({listed}), ≥ {limited:,.0f} s at {PRODUCTION_QPS} qps; "
            f"test server CPU {sum(cpu.values()):.1f} s")
    if heaviest:
        text += f", {cpu[heaviest] / calls[heaviest] * 1000:.1f} ms per {heaviest}"
    return text


class Worker:
    """The controller of one cluster, cycled back to back; counts cycles and queries."""

    def __init__(self, cluster):
        from apps.jobs.worker.controller import Controller

        self.controller = Controller(cluster)
        self.cycles = 0
        self.queries = QueryCounter()

    def cycle(self):
        from django.db import connection

        with connection.execute_wrapper(self.queries):
            self.controller.run_cycle()
        self.cycles += 1

    def close(self):
        self.controller.backend.close()


def timed(obj, name, spans):
    """Record the (start, end) of every call of `obj.name` in `spans`."""
    method = getattr(obj, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spans.append((started, time.perf_counter()))

    setattr(obj, name, wrapper)


def kubernetes_cluster(server, data_dir):
    """A Cluster row whose backend reaches the test server through a kubeconfig file, and its team."""
    cluster, node_type = build_cluster("k8s", NODES, backend="kubernetes")
    for i in range(NODES):
        server.add_node(f"k8s-node-{i:04d}", gpus=8, cpu="64", memory="512Gi")
    path = server.write_kubeconfig(pathlib.Path(data_dir) / "kubeconfig", context="pai-test")
    cluster.connection = f"kubeconfig:{path}#pai-test"
    cluster.api_qps, cluster.api_burst = float(QPS), int(float(os.environ.get("BENCH_K8S_WORKER_BURST", QPS)))
    cluster.save()
    user, vc = build_team(cluster, node_type, NODES)
    return cluster, user, vc


def bench_creation(server, meter, worker):
    """One cycle places every job and creates its pods."""
    from apps.jobs.models import TaskAttempt

    placing, creating = [], []
    timed(worker.controller, "schedule", placing)
    timed(worker.controller, "create_missing_pods", creating)
    meter.take()
    queries = worker.queries.count
    started, cpu = time.perf_counter(), time.thread_time()
    worker.cycle()
    cycle, cpu = time.perf_counter() - started, time.thread_time() - cpu
    calls, server_cpu = meter.take()
    created = TaskAttempt.objects.exclude(pod_uid="").count()
    assert created == PODS == len(server.list_objects("pods")), (created, PODS)
    create_seconds = sum(end - start for start, end in creating)
    place_seconds = sum(end - start for start, end in placing)
    print(f"pod creation: {JOBS:,} jobs × {PODS_PER_JOB} pods on {NODES:,} nodes of 8 GPUs, one cycle of {cycle:.1f} s "
          f"(controller CPU {cpu:.1f} s)")
    print(f"  placement (engine + PostgreSQL)  {place_seconds:6.1f} s   {JOBS / place_seconds:8,.0f} jobs/s")
    print(f"  pods created through the API     {create_seconds:6.1f} s   {PODS / create_seconds:8,.0f} pods/s")
    print(f"  API calls: {describe_calls(calls, server_cpu)}")
    print(f"  queries: {worker.queries.count - queries:,}")


def bench_transition(meter, worker, pods, kubelet, state, label):
    """The kubelet (a thread) changes every pod; the controller cycles until every job is in `state`."""
    from apps.jobs.models import Job

    produced = {}

    def produce():
        produced["start"], cpu = time.perf_counter(), time.thread_time()
        for namespace, name in pods:
            kubelet(namespace, name)
        produced["end"], produced["cpu"] = time.perf_counter(), time.thread_time() - cpu

    meter.take()
    cycles, queries, cpu = worker.cycles, worker.queries.count, time.thread_time()
    producer = threading.Thread(target=produce, name="bench-kubelet")
    producer.start()
    deadline = time.monotonic() + PHASE_TIMEOUT
    while True:
        worker.cycle()
        if Job.objects.filter(state=state).count() == JOBS:
            break
        if time.monotonic() > deadline:
            producer.join()
            counts = dict(Counter(Job.objects.values_list("state", flat=True)))
            raise SystemExit(f"{label}: jobs not all {state} after {PHASE_TIMEOUT:.0f} s: {counts}")
    done, cpu = time.perf_counter(), time.thread_time() - cpu
    producer.join()
    wall = done - produced["start"]
    cycles, queries = worker.cycles - cycles, worker.queries.count - queries
    calls, server_cpu = meter.take()
    print(f"  {label:<18} {len(pods) / wall:7,.0f} pod state changes/s ({len(pods):,} in {wall:.1f} s, {cycles} cycles, "
          f"controller CPU {cpu:.1f} s; kubelet wrote {len(pods) / (produced['end'] - produced['start']):,.0f}/s, "
          f"CPU {produced['cpu']:.1f} s)")
    print(f"    API calls: {describe_calls(calls, server_cpu)}")
    print(f"    queries: {queries:,} ({queries / cycles:,.0f} per cycle)")
    return wall


def bench_state_changes(server, meter, worker, tenant):
    from apps.jobs.models import TaskAttempt
    from apps.jobs.worker.backends import NAMESPACE_PREFIX

    namespace = f"{NAMESPACE_PREFIX}{tenant.slug}"
    pods = [(namespace, name) for name in TaskAttempt.objects.order_by("pk").values_list("pod_name", flat=True)]
    print("pod state changes, kubelet thread and controller cycles at once:")
    to_running = bench_transition(meter, worker, pods, server.run_pod, "RUNNING", "Pending→Running")
    to_done = bench_transition(
        meter, worker, pods, lambda ns, name: server.finish_pod(ns, name, 0), "SUCCEEDED", "Running→Succeeded"
    )
    overall = 2 * len(pods) / (to_running + to_done)
    print(f"  overall            {overall:7,.0f} pod state changes/s   (target ≥ {TARGET:,}/s: "
          f"{'met' if overall >= TARGET else 'MISSED'})")
    return overall


def compare_in_memory(overall):
    """bench_worker.py's reconciler (scripted in-memory backend), here, for the ratio."""
    from benchmarks import bench_worker

    _running, _done, in_memory = bench_worker.bench_reconciler()
    print(f"bench_worker.py's in-memory reconciler ({bench_worker.JOBS:,} jobs × {bench_worker.PODS_PER_JOB} pods, same "
          f"database): {in_memory:,.0f} pod state changes/s; with Kubernetes over HTTP: {overall / in_memory:.3g}× that")


def main():
    url = database_url("pai_bench_k8s_worker")
    recreate_database(url)
    from tests.kubeserver import KubeServer

    with tempfile.TemporaryDirectory() as data_dir:
        setup_django(url, data_dir)
        from django.db import connections

        from apps.jobs.services import submit_job

        print(f"worker + Kubernetes backend on PostgreSQL ({url.rsplit('/', 1)[-1]}), {os.cpu_count()} cores, "
              f"client limit {float(QPS):,.0f} qps")
        with KubeServer() as server:
            meter = ApiMeter(server)
            cluster, user, vc = kubernetes_cluster(server, data_dir)
            started = time.perf_counter()
            for i in range(JOBS):
                submit_job(user, job_text(f"job-{i}", vc.name, PODS_PER_JOB, "true"))
            print(f"setup: {JOBS:,} jobs submitted in {time.perf_counter() - started:.1f} s; RSS {peak_rss_mb():,.0f} MB")
            worker = Worker(cluster)
            try:
                bench_creation(server, meter, worker)
                overall = bench_state_changes(server, meter, worker, vc.tenant)
            finally:
                worker.close()
            print(f"peak RSS {peak_rss_mb():,.0f} MB (the process holds the worker, and the API test server with its "
                  f"{len(server.list_objects('pods')):,} pods and {len(server.list_objects('events')):,} events)")
            assert not server.internal_errors, server.internal_errors[0]
        if COMPARE:
            compare_in_memory(overall)
        connections.close_all()
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    assert not left, f"threads left running: {left}"


if __name__ == "__main__":
    main()
