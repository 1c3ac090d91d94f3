"""The worker and the Kubernetes backend together, end to end, on PostgreSQL.

pai's real worker (the controller of apps/jobs/worker with the real scheduling engine)
drives the real Kubernetes backend over HTTP. Its peer, the Kubernetes API test server
(tests/kubeserver), runs in a process of its own (tests/kubeserver/process.py) with a
kubelet thread that plays every node, so that what pai costs is measured apart from what
the server costs. The worker reaches it through a kubeconfig file, as a Cluster row does.

The run: jobs of 4 one-GPU pods are submitted to a cluster with a GPU for each pod. Then the clock starts: the controller cycles back to back while the kubelet
starts every pod pai creates, until every job is RUNNING; then the kubelet ends every
pod with exit code 0 while the controller cycles until every job is SUCCEEDED, and on
until pai has deleted every pod (the end of a pod's life in pai: its log and exit
stored, the pod gone). Printed:

- end to end: seconds from the first cycle to all jobs running, to all succeeded, to
  all pods deleted (target for 10,000 pods: ≤ 5 minutes);
- pai's controller pod state changes per second: in each phase, the pods the kubelet
  changed over the seconds from its first change to pai's having applied the last
  (target ≥ 500/s), and end to end (both changes of every pod over the whole run);
- API calls per pod lifecycle: the requests about one pod (create, read, log, delete)
  over the pods (target ≤ 3: create, delete and at most one more), by kind; and beside
  them the run's other requests (lists, what a namespace needs once), watches left out;
- pai's CPU per pod state change: the worker process's own CPU time (controller and
  watch threads) over the state changes, beside the server process's CPU time and that
  of the machine's PostgreSQL processes (all of them: other work on the machine counts
  too), and the rate the three together allow on this machine's cores;
- queries per cycle, peak RSS of the worker process.

Sizes: `BENCH_K8S_WORKER_JOBS` × `BENCH_K8S_WORKER_PODS_PER_JOB` (default 250 × 4 =
1,000 pods) on `BENCH_K8S_WORKER_NODES` nodes (default: 8 GPUs each, as many as the pods
need; fewer nodes get more GPUs each, so that every pod runs at once); the default is
within `make bench`'s time. The scale it is for is 10,000 pods on 1,000 nodes:
`BENCH_K8S_WORKER_JOBS=2500 BENCH_K8S_WORKER_NODES=1000` (10 GPUs a node). The client's rate limit is the Cluster's
`api_qps`/`api_burst` (default 200/400): the benchmark measures pai, not the limiter, so
it lifts it unless `BENCH_K8S_WORKER_QPS` sets one, and prints how long the same
requests take at the default rate. `BENCH_K8S_WORKER_TIMEOUT` (900 s) bounds each phase;
`BENCH_K8S_WORKER_PROFILE=path` writes a cProfile of the controller's cycles there.

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

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.hostspeed import host_speed  # noqa: E402
from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402
from benchmarks.worker_setup import build_cluster, build_team, job_text, setup_django  # noqa: E402

JOBS = int(os.environ.get("BENCH_K8S_WORKER_JOBS", "250"))
PODS_PER_JOB = int(os.environ.get("BENCH_K8S_WORKER_PODS_PER_JOB", "4"))
PODS = JOBS * PODS_PER_JOB
NODES = int(os.environ.get("BENCH_K8S_WORKER_NODES", str(-(-PODS // 8))))
GPUS_PER_NODE = max(8, -(-PODS // NODES))  # every pod runs at once
QPS = float(os.environ.get("BENCH_K8S_WORKER_QPS", "1000000"))
BURST = int(float(os.environ.get("BENCH_K8S_WORKER_BURST", str(QPS))))
PHASE_TIMEOUT = float(os.environ.get("BENCH_K8S_WORKER_TIMEOUT", "900"))
PROFILE = os.environ.get("BENCH_K8S_WORKER_PROFILE", "")
TARGET_SECONDS, TARGET_RATE, TARGET_CALLS = 300, 500, 3


def postgres_cpu():
    """CPU seconds of this machine's PostgreSQL processes (None when none is visible here)."""
    import psutil

    total, seen = 0.0, False
    for process in psutil.process_iter(["name", "cpu_times"]):
        if process.info["name"] in ("postgres", "postmaster") and process.info["cpu_times"] is not None:
            total += process.info["cpu_times"].user + process.info["cpu_times"].system
            seen = True
    return total if seen else None


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class QueryCounter:
    """Counts the SQL statements of the main thread's connection (the controller's)."""

    def __init__(self):
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


class Worker:
    """The controller of one cluster, cycled back to back; counts cycles and queries."""

    def __init__(self, cluster):
        from apps.jobs.worker.controller import Controller

        self.controller = Controller(cluster)
        self.cycles = 0
        self.queries = QueryCounter()
        self.profile = None
        if PROFILE:
            import cProfile

            self.profile = cProfile.Profile()

    def cycle(self):
        from django.db import connection

        with connection.execute_wrapper(self.queries):
            if self.profile is not None:
                self.profile.enable()
            try:
                self.controller.run_cycle()
            finally:
                if self.profile is not None:
                    self.profile.disable()
        self.cycles += 1

    def close(self):
        self.controller.close()
        if self.profile is not None:
            self.profile.dump_stats(PROFILE)
            print(f"profile of the controller's cycles written to {PROFILE}")


def kubernetes_cluster(server, data_dir):
    """A Cluster row whose backend reaches the server through a kubeconfig file, and its team."""
    cluster, node_type = build_cluster("k8s", NODES, backend="kubernetes", gpus_per_node=GPUS_PER_NODE)
    for i in range(NODES):
        server.call("add_node", f"k8s-node-{i:04d}", gpus=GPUS_PER_NODE, cpu="64", memory="512Gi")
    path = server.write_kubeconfig(pathlib.Path(data_dir) / "kubeconfig", context="pai-test")
    cluster.connection = f"kubeconfig:{path}#pai-test"
    cluster.api_qps, cluster.api_burst = QPS, BURST
    cluster.save()
    user, vc = build_team(cluster, node_type, NODES)
    return cluster, user, vc


def cycle_until(worker, done, label):
    from apps.jobs.models import Job

    deadline = time.monotonic() + PHASE_TIMEOUT
    while True:
        worker.cycle()
        if done():
            return time.time()
        if time.monotonic() > deadline:
            counts = dict(Counter(Job.objects.values_list("state", flat=True)))
            raise SystemExit(f"{label}: not done after {PHASE_TIMEOUT:.0f} s: jobs {counts}")


def run(server, worker, namespace):
    from apps.clusters.models import DEFAULT_API_QPS
    from apps.jobs.models import Job

    def all_jobs(state):
        return lambda: Job.objects.filter(state=state).count() == JOBS

    before = server.stats()  # counters from here
    pg_before = postgres_cpu()
    cpu, cycles, queries = time.process_time(), worker.cycles, worker.queries.count
    started = time.time()
    server.kubelet("run", namespace)
    running = cycle_until(worker, all_jobs("RUNNING"), "Pending→Running")
    first_phase = server.stats()
    server.kubelet("finish", namespace)
    succeeded = cycle_until(worker, all_jobs("SUCCEEDED"), "Running→Succeeded")
    second_phase = server.stats()
    gone = cycle_until(worker, lambda: server.call("count", "pods", namespace) == 0, "pod deletion")
    server.kubelet("stop")
    last = server.stats()
    cpu = time.process_time() - cpu
    pg_after = postgres_cpu()
    cycles, queries = worker.cycles - cycles, worker.queries.count - queries

    calls = Counter(first_phase["calls"]) + Counter(second_phase["calls"]) + Counter(last["calls"])
    requests = {kind: n for kind, n in calls.items() if not kind.startswith("WATCH")}
    server_cpu = last["cpu"] - before["cpu"]
    to_running = running - first_phase["kubelet"]["first"]
    to_succeeded = succeeded - second_phase["kubelet"]["first"]
    changes = 2 * PODS
    print(f"end to end, {JOBS:,} jobs × {PODS_PER_JOB} pods = {PODS:,} pods on {NODES:,} nodes of {GPUS_PER_NODE} GPUs:")
    print(f"  all running    {running - started:7.1f} s")
    print(f"  all succeeded  {succeeded - started:7.1f} s   (target ≤ {TARGET_SECONDS} s for 10,000 pods: "
          f"{'met' if succeeded - started <= TARGET_SECONDS else 'MISSED'})")
    print(f"  all pods deleted {gone - started:5.1f} s   ({cycles} cycles, {queries / cycles:,.0f} queries per cycle)")
    print("pai's controller, pod state changes per second (kubelet's first change → pai applied the last):")
    print(f"  Pending→Running    {PODS / to_running:7,.0f}/s  ({PODS:,} in {to_running:.1f} s; pods are started as "
          f"pai creates them)")
    print(f"  Running→Succeeded  {PODS / to_succeeded:7,.0f}/s  ({PODS:,} in {to_succeeded:.1f} s)")
    overall = changes / (succeeded - started)
    print(f"  end to end         {overall:7,.0f}/s  ({changes:,} changes in {succeeded - started:.1f} s, creation "
          f"included; target ≥ {TARGET_RATE}/s: {'met' if overall >= TARGET_RATE else 'MISSED'})")
    # A pod's own requests (its creation, log, deletion, a read of it), and the rest: the
    # relists and what a namespace needs once (quota, priority class), whatever the pods.
    own = {kind: n for kind, n in requests.items() if kind.split(" ")[1] in ("pods", "pods/log", "pods/binding")
           and not kind.startswith("LIST")}
    others = {kind: n for kind, n in requests.items() if kind not in own}
    per_pod = sum(own.values()) / PODS
    listed = ", ".join(f"{n / PODS:.2f} {kind}" for kind, n in sorted(own.items(), key=lambda kv: -kv[1]))
    print(f"API calls per pod lifecycle: {per_pod:.2f} (target ≤ {TARGET_CALLS}: "
          f"{'met' if per_pod <= TARGET_CALLS else 'MISSED'}): {listed}; besides, for the whole run, "
          f"{sum(others.values())} ({', '.join(f'{n} {kind}' for kind, n in sorted(others.items()))}); "
          f"{sum(requests.values()) / DEFAULT_API_QPS:,.0f} s of requests at the default {DEFAULT_API_QPS:,.0f}/s")
    print(f"CPU per pod state change: pai (worker process) {cpu / changes * 1000:.2f} ms ({cpu:.1f} s in all); "
          f"API test server process {server_cpu / changes * 1000:.2f} ms ({server_cpu:.1f} s, its kubelet "
          f"{first_phase['kubelet']['cpu'] + second_phase['kubelet']['cpu']:.1f} s of it)" + (
              "" if pg_before is None or pg_after is None else
              f"; PostgreSQL {(pg_after - pg_before) / changes * 1000:.2f} ms ({pg_after - pg_before:.1f} s, its "
              f"processes on this machine, whoever's work)"))
    if pg_before is not None and pg_after is not None:
        total = (cpu + server_cpu + pg_after - pg_before) / changes
        print(f"  the three together {total * 1000:.2f} ms per change: at most {os.cpu_count() / total:,.0f} changes/s "
              f"on {os.cpu_count()} cores if nothing else ran")
    # pai's worker and the server are each one Python process: neither uses more than a
    # core for long (the GIL), so each one's cost per change bounds the rate on its own.
    wall = gone - started
    print(f"  busy over the run ({wall:.1f} s): pai's worker {cpu / wall:.0%} of a core (alone it would allow "
          f"{changes / cpu:,.0f} changes/s), the server {server_cpu / wall:.0%} ({changes / server_cpu:,.0f}/s)")
    errors = last["internal_errors"]
    assert not errors, errors[0]


def main():
    url = database_url("pai_bench_k8s_worker")
    recreate_database(url)
    from tests.kubeserver.process import ServerProcess

    with tempfile.TemporaryDirectory() as data_dir:
        setup_django(url, data_dir)
        from django.db import connections

        from apps.jobs.services import submit_job
        from apps.jobs.worker.backends import NAMESPACE_PREFIX

        from django.conf import settings

        print(f"worker + Kubernetes backend on PostgreSQL ({url.rsplit('/', 1)[-1]}), API test server in its own "
              f"process, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, host speed {host_speed():.2f} "
              f"(benchmarks/hostspeed.py), client limit {QPS:,.0f} qps, "
              f"{settings.PAI_KUBE_CONCURRENCY} requests in flight, at most "
              f"{settings.PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE} placements and "
              f"{settings.PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE} pod creations per cycle")
        with ServerProcess() as server:
            cluster, user, vc = kubernetes_cluster(server, data_dir)
            setup = time.perf_counter()
            for i in range(JOBS):
                submit_job(user, job_text(f"job-{i}", vc.name, PODS_PER_JOB, "true"))
            print(f"setup: {JOBS:,} jobs submitted in {time.perf_counter() - setup:.1f} s")
            worker = Worker(cluster)
            try:
                run(server, worker, f"{NAMESPACE_PREFIX}{vc.tenant.slug}")
            finally:
                worker.close()
            print(f"peak RSS of the worker process {peak_rss_mb():,.0f} MB")
        connections.close_all()
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    assert not left, f"threads left running: {left}"


if __name__ == "__main__":
    main()
