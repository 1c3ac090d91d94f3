"""The worker on PostgreSQL: reconciler throughput and submit-to-RUNNING latency.

1. Pod state changes per second the reconciler processes (target ≥ 2,000/s): 1,000 jobs
   of 4 pods each are placed by the real engine and controller on a 512-node cluster;
   a scripted backend (this file's, in memory, so that only pai's side is measured)
   then reports every pod Running, then every pod Succeeded: 8,000 state changes, each
   applied to task attempts, attempts and jobs exactly as in production, jobs completed.
2. Time from submit to RUNNING on an idle local cluster (target ≤ 2 s): a real
   `manage.py run_scheduler` process with its default tick, the local backend running
   real processes, jobs submitted one at a time through the service the API calls.

The database is dedicated and re-created each run: `BENCH_DATABASE_URL`, else the
server of `DATABASE_URL` (default 127.0.0.1:5432, user postgres) with database
`pai_bench_worker`. Run: `make bench` or `.venv/bin/python benchmarks/bench_worker.py`.
"""

import itertools
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.hostspeed import host_speed  # noqa: E402
from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402
from benchmarks.worker_setup import build_cluster, build_team, job_text, setup_django  # noqa: E402

JOBS = int(os.environ.get("BENCH_WORKER_JOBS", "1000"))
PODS_PER_JOB = 4
NODES = 512
LATENCY_SAMPLES = int(os.environ.get("BENCH_WORKER_LATENCY_SAMPLES", "10"))


def make_scripted_backend():
    from scheduler.backends import ClusterBackend, NodeInfo, PodObservation

    class ScriptedBackend(ClusterBackend):
        """Pods exist only in memory; the benchmark decides when their state changes."""

        def __init__(self, nodes):
            self.nodes = nodes
            self.pods = {}
            self.feed = []
            self.version = itertools.count(1)

        def _observe(self, name, phase, **fields):
            pod = self.pods[name]
            observation = PodObservation(name=name, uid=pod["uid"], phase=phase, resource_version=str(next(self.version)),
                                         node=pod["node"], ip="10.0.0.1", labels=pod["labels"], **fields)
            self.feed.append(observation)
            return observation

        def list_nodes(self):
            return [NodeInfo(name=n, ip="10.0.0.1", gpu=8, cpu=64, memory_mb=512000) for n in self.nodes]

        def create_pod(self, spec):
            if spec.name not in self.pods:
                self.pods[spec.name] = {"uid": f"uid-{spec.name}", "node": spec.node, "labels": spec.labels}
                return self._observe(spec.name, "Pending")
            return self.feed[-1]

        def delete_pod(self, name, uid=None, grace_seconds=None):
            return name in self.pods

        def list_pods(self, selector=None):
            return []

        def poll(self, since=None):
            if since is None:
                return []
            batch, self.feed = self.feed, []
            return batch

        def cursor(self):
            return "0"

        def read_log(self, name, tail_lines=None, stream="all"):
            return ""

        def read_events(self, name):
            return []

        def forget_pod(self, name):
            self.pods.pop(name, None)

        def set_all(self, phase, **fields):
            for name in self.pods:
                self._observe(name, phase, **fields)

    return ScriptedBackend


def bench_reconciler():
    from apps.jobs.models import Job
    from apps.jobs.services import submit_job
    from apps.jobs.worker.controller import Controller

    cluster, node_type = build_cluster("recon", NODES)
    user, vc = build_team(cluster, node_type, NODES)
    for i in range(JOBS):
        submit_job(user, job_text(f"job-{i}", vc.name, PODS_PER_JOB, "true"))
    backend = make_scripted_backend()([f"recon-node-{i:04d}" for i in range(NODES)])
    controller = Controller(cluster, backend=backend)
    # Placements and pod creations per cycle are capped (PAI_SCHEDULER_MAX_*_PER_CYCLE): a few
    # cycles place every job and create its pods; what is timed starts after.
    for _ in range(1 + JOBS * PODS_PER_JOB // 500):
        controller.run_cycle()
        if len(backend.pods) == JOBS * PODS_PER_JOB:
            break
    assert len(backend.pods) == JOBS * PODS_PER_JOB, len(backend.pods)
    backend.feed.clear()

    now = datetime.now(UTC)
    backend.set_all("Running", started_at=now)
    started = time.perf_counter()
    controller.observe()
    controller.advance_jobs()
    running_seconds = time.perf_counter() - started
    jobs = Job.objects.filter(virtual_cluster=vc)
    assert jobs.filter(state="RUNNING").count() == JOBS

    backend.set_all("Succeeded", exit_code=0, started_at=now, finished_at=datetime.now(UTC))
    started = time.perf_counter()
    controller.observe()
    controller.advance_jobs()
    done_seconds = time.perf_counter() - started
    assert jobs.filter(state="SUCCEEDED").count() == JOBS, jobs.values_list("state", flat=True).distinct()
    changes = JOBS * PODS_PER_JOB
    return changes / running_seconds, changes / done_seconds, 2 * changes / (running_seconds + done_seconds)


def bench_submit_to_running(url, data_dir):
    from django.db import connections

    from apps.jobs.models import Job
    from apps.jobs.services import submit_job

    cluster, node_type = build_cluster("local", 4)
    user, vc = build_team(cluster, node_type, 4)
    connections.close_all()
    env = {**os.environ, "DATABASE_URL": url, "PAI_DATA_DIR": data_dir}
    worker = subprocess.Popen([sys.executable, "manage.py", "run_scheduler"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(5)  # the worker has started, holds the lease and built its engine
        latencies = []
        for i in range(LATENCY_SAMPLES):
            started = time.perf_counter()
            job, _ = submit_job(user, job_text(f"latency-{i}", vc.name, 2, "sleep 2"))
            while Job.objects.filter(pk=job.pk).values_list("state", flat=True).get() != "RUNNING":
                if time.perf_counter() - started > 30:
                    raise SystemExit(f"job latency-{i} did not start within 30 s")
                time.sleep(0.01)
            latencies.append(time.perf_counter() - started)
            while Job.objects.filter(pk=job.pk).values_list("state", flat=True).get() == "RUNNING":
                time.sleep(0.05)
        return latencies
    finally:
        worker.terminate()
        worker.wait(30)


def main():
    url = database_url("pai_bench_worker")
    recreate_database(url)
    with tempfile.TemporaryDirectory() as data_dir:
        setup_django(url, data_dir)
        print(f"worker benchmark on PostgreSQL ({url.rsplit('/', 1)[-1]}), {os.cpu_count()} cores, "
              f"host speed {host_speed():.2f} (benchmarks/hostspeed.py)")
        to_running, to_done, overall = bench_reconciler()
        print(f"reconciler: {JOBS} jobs × {PODS_PER_JOB} pods on {NODES} nodes")
        print(f"  Pending→Running  {to_running:8.0f} pod state changes/s")
        print(f"  Running→Succeeded {to_done:7.0f} pod state changes/s (jobs completed too)")
        print(f"  overall          {overall:8.0f} pod state changes/s   (target ≥ 2,000/s)")
        latencies = bench_submit_to_running(url, data_dir)
        median = statistics.median(latencies)
        print(f"submit → RUNNING on an idle local cluster ({len(latencies)} jobs of 2 pods, real processes):")
        print(f"  median {median:.2f} s   max {max(latencies):.2f} s   (target ≤ 2 s)")


if __name__ == "__main__":
    main()
