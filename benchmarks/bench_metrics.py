"""Prometheus scrape of `/metrics` with 100,000 jobs in PostgreSQL.

Prints the p50/p95 wall time of `GET /metrics` as Prometheus makes it: over HTTP, with
the bearer token, to gunicorn (2 sync workers in prometheus-client's multiprocess mode, as
the Helm chart runs the web) in its own process; and, beside it, pai's own cost: the time
and CPU of building the exposition in-process (the database queries included). Target:
a scrape ≤ 200 ms.

The farm: 20 VCs (two with 100,000 jobs between them, in every state; 10 % waiting), the
worker's published figures of a busy scheduler (cycles, placements per VC, preemptions,
Kubernetes requests per verb), and a lease holder. The database is dedicated, dropped and
re-created each run: `BENCH_DATABASE_URL`, else the server of `DATABASE_URL` with database
`pai_bench_metrics`. Run with `make bench` or `.venv/bin/python benchmarks/bench_metrics.py`.
"""

import http.client
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_api import _free_port, build_farm, bulk_insert_jobs, setup_django  # noqa: E402
from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402

JOBS_IN_DATABASE = int(os.environ.get("BENCH_JOBS", "100000"))
SCRAPES = int(os.environ.get("BENCH_SCRAPES", "50"))
TOKEN = "bench-metrics-token"


def publish_busy_worker_figures(vcs):
    """What a scheduler leading a farm for a while has published."""
    from apps.jobs.worker import lease
    from apps.monitoring import figures

    for cluster in ("bench", "bench-2"):
        for i in range(5000):
            figures.cycle_finished(cluster, 0.002 * (i % 700), "ok" if i % 500 else "failed")
        for vc in vcs:
            figures.recorder.count("pai_scheduler_placements_total", 250, cluster=cluster, vc=vc)
        figures.recorder.count("pai_scheduler_preemptions_total", 40, cluster=cluster)
        for mode in ("kill", "lazy"):
            figures.recorder.count("pai_scheduler_preemption_victims_total", 60, cluster=cluster, mode=mode)
        observe = figures.pod_api_observer(cluster)
        for resource, verb in (("pods", "create"), ("pods", "delete"), ("pods", "list"), ("pods", "watch"),
                               ("pods/log", "get"), ("nodes", "list"), ("nodes", "watch"), ("events", "list")):
            for outcome in ("ok", "404", "409", "503", "network"):
                observe(resource, verb, outcome)
    figures.recorder.publish(force=True)
    lease.acquire("bench-worker")


def exposition_cost(scrapes):
    from django.db import reset_queries

    from apps.monitoring.metrics import exposition

    exposition()  # warm-up: connections, query plans
    timings, cpu = [], time.process_time()
    for _ in range(scrapes):
        reset_queries()
        started = time.perf_counter()
        body = exposition()
        timings.append((time.perf_counter() - started) * 1000)
    cpu = (time.process_time() - cpu) / scrapes * 1000
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1], cpu, len(body)


def http_scrapes(url, scrapes):
    port = _free_port()
    multiproc = tempfile.mkdtemp(prefix="pai-bench-multiproc-")
    env = dict(os.environ, DATABASE_URL=url, DEBUG="0", PAI_METRICS_TOKEN=TOKEN, PROMETHEUS_MULTIPROC_DIR=multiproc,
               DJANGO_SETTINGS_MODULE="pai.settings")
    env.pop("REDIS_URL", None)
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:pai.gunicorn", "pai.wsgi", f"--bind=127.0.0.1:{port}",
             "--workers=2"],
            cwd=ROOT, env=env, stdout=log, stderr=log,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    status, _ = _scrape(port)
                    if status == 200:
                        break
                except OSError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"gunicorn did not start:\n{log.read().decode()[-2000:]}")
                time.sleep(0.2)
            for _ in range(5):  # warm-up: both workers' connections and imports
                _scrape(port)
            timings = []
            for _ in range(scrapes):
                started = time.perf_counter()
                status, size = _scrape(port)
                timings.append((time.perf_counter() - started) * 1000)
                assert status == 200
        finally:
            server.terminate()
            server.wait(timeout=30)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1], size


def _scrape(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/metrics", headers={"Host": "localhost", "Authorization": f"Bearer {TOKEN}"})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, len(body)


def main():
    url = database_url("pai_bench_metrics")
    print(f"database: {url.rsplit('@', 1)[-1]} (dropped and re-created)")
    recreate_database(url)
    setup_django(url)
    _, users = build_farm()
    from apps.jobs.models import Job
    from apps.virtualclusters.models import VirtualCluster

    cluster, tenant = users["a"][0][1].cluster, users["a"][0][1].tenant
    for i in range(18):
        VirtualCluster.objects.create(name=f"vc_{i:02d}", tenant=tenant, cluster=cluster)
    started = time.perf_counter()
    bulk_insert_jobs(users, JOBS_IN_DATABASE - Job.objects.count())
    # The steady state autovacuum keeps a table in (visibility map set), which the bulk
    # insert and its rewrite of every row left behind.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE jobs_job")
    print(f"inserted jobs in {time.perf_counter() - started:.1f} s; jobs in database: {Job.objects.count()}, "
          f"of which waiting: {Job.objects.filter(state='WAITING').count()}; VCs: {VirtualCluster.objects.count()}")
    publish_busy_worker_figures(sorted(VirtualCluster.objects.values_list("name", flat=True)))

    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    p50, p95, size = http_scrapes(url, SCRAPES)
    print(f"scrape GET /metrics over HTTP (gunicorn, 2 workers, multiprocess mode, bearer token), {SCRAPES} scrapes: "
          f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (target ≤ 200 ms); {size / 1024:.0f} KiB")
    p50, p95, cpu, _ = exposition_cost(SCRAPES)
    print(f"pai's own cost, in-process exposition (database queries included): p50 {p50:.1f} ms, p95 {p95:.1f} ms; "
          f"{cpu:.1f} ms CPU per scrape in this process")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
