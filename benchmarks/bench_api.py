"""Job API throughput and latency on PostgreSQL.

Prints (1) job submissions per second through `POST /api/v2/jobs` (YAML bodies):
  - in-process, one client: DRF's APIClient, the full Django/DRF stack without an HTTP
    server, one request after another; with the CPU time each costs;
  - over HTTP as production serves it: gunicorn with `BENCH_HTTP_WORKERS` sync workers
    (the Helm chart's default, 3), Redis as cache and broker, bearer tokens, and
    `BENCH_HTTP_CLIENTS` client processes submitting at once, each as its own user;
and (2) the p50/p95 latency of `GET /api/v2/jobs?limit=100` with 100,000 jobs in the
database, for a team member and for a platform admin. Targets: ≥ 200 submissions/s,
p95 ≤ 100 ms.

The database is a dedicated one, dropped and re-created on every run: `BENCH_DATABASE_URL`,
else the server of `DATABASE_URL` (else 127.0.0.1:5432, user postgres) with database
`pai_bench`. The HTTP part uses Redis database 14 (`BENCH_REDIS_URL`, flushed on every
run; empty: no Redis, each gunicorn worker with its own memory cache). Run with
`make bench` or `.venv/bin/python benchmarks/bench_api.py`.
"""

import http.client
import logging
import multiprocessing
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402

SUBMISSIONS = int(os.environ.get("BENCH_SUBMISSIONS", "1000"))
JOBS_IN_DATABASE = int(os.environ.get("BENCH_JOBS", "100000"))
LIST_REQUESTS = int(os.environ.get("BENCH_LIST_REQUESTS", "200"))
HTTP_WORKERS = int(os.environ.get("BENCH_HTTP_WORKERS", "3"))
HTTP_CLIENTS = int(os.environ.get("BENCH_HTTP_CLIENTS", "4"))
HTTP_SUBMISSIONS = int(os.environ.get("BENCH_HTTP_SUBMISSIONS", "2000"))
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
THROTTLES = ("PAI_THROTTLE_API", "PAI_THROTTLE_JOB_SUBMIT", "PAI_THROTTLE_JOB_LIST")


def setup_django(url):
    os.environ["DATABASE_URL"] = url
    os.environ["DEBUG"] = "0"
    # The benchmark measures the service, not the rate limits.
    for name in THROTTLES:
        os.environ[name] = "100000000/min"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai.settings")
    import django

    django.setup()
    # One "Enqueued" line per submission (the scheduler kick) would drown the figures.
    logging.getLogger("django-q").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_farm():
    """Two teams on one cluster of 64 nodes × 8 A100: what a mid-size OpenPAI install looks like."""
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Group
    from apps.accounts.roles import ADMIN_GROUP
    from apps.clusters.models import CellType, Cluster
    from apps.tenants.models import Membership, Tenant
    from apps.virtualclusters.models import VirtualCluster, VirtualClusterCell, VirtualClusterGrant

    User = get_user_model()
    cluster = Cluster.objects.create(name="bench")
    a100 = CellType.objects.create(cluster=cluster, name="A100", gpu=1, cpu=8, memory_mb=65536)
    node = CellType.objects.create(cluster=cluster, name="A100-NODE", child=a100, child_count=8, is_node_level=True)
    cpu = CellType.objects.create(cluster=cluster, name="CPU", gpu=0, cpu=4, memory_mb=16384, device_resource="")
    cpu_node = CellType.objects.create(cluster=cluster, name="CPU-NODE", child=cpu, child_count=8, is_node_level=True)
    root = User.objects.create_user("root", password="bench-password")
    root.groups.add(Group.objects.get(name=ADMIN_GROUP))
    users = {}
    for key in ("a", "b"):
        tenant = Tenant.objects.create(slug=f"team-{key}", name=f"Team {key.upper()}")
        group = Group.objects.create(name=f"team_{key}", tenant=tenant)
        vc = VirtualCluster.objects.create(name=f"team_{key}", tenant=tenant, cluster=cluster)
        VirtualClusterCell.objects.create(virtual_cluster=vc, cell_type=node, count=32)
        VirtualClusterCell.objects.create(virtual_cluster=vc, cell_type=cpu_node, count=4)
        VirtualClusterGrant.objects.create(virtual_cluster=vc, group=group)
        for i in range(25):
            user = User.objects.create_user(f"{key}_user{i}", password="bench-password")
            Membership.objects.create(tenant=tenant, user=user)
            user.groups.add(group)
            users.setdefault(key, []).append((user, vc))
    return root, users


JOB_YAML = (ROOT / "tests" / "jobs" / "jobfiles" / "single_gpu.yaml").read_text()


def bench_submissions(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    bodies = [
        JOB_YAML.replace("mnist_single_gpu", f"bench_{i}")
        for i in range(SUBMISSIONS + 20)
    ]
    for body in bodies[:20]:  # warm-up
        assert client.post("/api/v2/jobs", body, content_type="text/yaml").status_code == 202
    started, cpu_started = time.perf_counter(), time.process_time()
    for body in bodies[20:]:
        response = client.post("/api/v2/jobs", body, content_type="text/yaml")
        if response.status_code != 202:
            sys.exit(f"submission failed: {response.status_code} {response.content[:300]}")
    elapsed = time.perf_counter() - started
    return SUBMISSIONS / elapsed, elapsed, (time.process_time() - cpu_started) / SUBMISSIONS * 1000


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(port, token, body):
    # gunicorn's sync workers close the connection after each response, as in production.
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/api/v2/jobs", body.encode(), {
            "Content-Type": "text/yaml", "Authorization": f"Bearer {token}", "Host": "localhost",
        })
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _cpu_seconds_of_tree(root_pid):
    """User + system CPU seconds of a process and its children (Linux /proc), or None."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, found = 0.0, False
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            fields = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == root_pid or int(fields[1]) == root_pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
            found = True
    return total if found else None


def _http_client(index, port, token, count, barrier, results):
    """One client process: a few warm-up submits, then `count` submits one after another."""
    bodies = [JOB_YAML.replace("mnist_single_gpu", f"http_{index}_{i}") for i in range(count + 5)]
    for body in bodies[:5]:
        status, content = _post(port, token, body)
        if status != 202:
            results.put(("error", f"warm-up submission failed: {status} {content[:300]}"))
            return
    barrier.wait()
    latencies = []
    for body in bodies[5:]:
        started = time.perf_counter()
        status, content = _post(port, token, body)
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 202:
            results.put(("error", f"submission failed: {status} {content[:300]}"))
            return
    results.put(("ok", (latencies, time.process_time())))


def _start_gunicorn(url, port, log):
    env = dict(os.environ, DATABASE_URL=url, DEBUG="0", REDIS_URL=REDIS_URL, DJANGO_SETTINGS_MODULE="pai.settings")
    if not REDIS_URL:
        env.pop("REDIS_URL")
    env.update({name: "100000000/min" for name in THROTTLES})
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "pai.wsgi", f"--bind=127.0.0.1:{port}", f"--workers={HTTP_WORKERS}",
         "--worker-tmp-dir=/dev/shm" if os.path.isdir("/dev/shm") else "--worker-tmp-dir=/tmp"],
        cwd=ROOT, env=env, stdout=log, stderr=log,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/api/v2/info", headers={"Host": "localhost"})
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    log.seek(0)
    sys.exit(f"gunicorn did not start:\n{log.read().decode()[-2000:]}")


def bench_http_submissions(url, users):
    """Submissions/s through gunicorn with several clients at once; (rate, elapsed, p50, p95)."""
    from apps.accounts.services import issue_application_token

    if REDIS_URL:
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    tokens = [issue_application_token(user)[1] for user, _ in users["a"][10:10 + HTTP_CLIENTS]]
    per_client = HTTP_SUBMISSIONS // HTTP_CLIENTS
    port = _free_port()
    with tempfile.TemporaryFile() as log:
        server = _start_gunicorn(url, port, log)
        try:
            context = multiprocessing.get_context("spawn")
            barrier, results = context.Barrier(HTTP_CLIENTS + 1), context.Queue()
            clients = [
                context.Process(target=_http_client, args=(i, port, token, per_client, barrier, results))
                for i, token in enumerate(tokens)
            ]
            for client in clients:
                client.start()
            barrier.wait(timeout=120)
            started, server_cpu = time.perf_counter(), _cpu_seconds_of_tree(server.pid)
            latencies, client_cpu = [], 0.0
            for _ in clients:
                kind, value = results.get(timeout=600)
                if kind == "error":
                    sys.exit(value)
                latencies += value[0]
                client_cpu += value[1]
            elapsed = time.perf_counter() - started
            if server_cpu is not None:
                server_cpu = (_cpu_seconds_of_tree(server.pid) - server_cpu) / len(latencies) * 1000
            for client in clients:
                client.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    latencies.sort()
    return {
        "rate": len(latencies) / elapsed, "elapsed": elapsed, "p50": statistics.median(latencies),
        "p95": latencies[int(len(latencies) * 0.95) - 1], "server_cpu": server_cpu,
        # The clients' whole lives, warm-up and interpreter start included: an upper bound.
        "client_cpu": client_cpu / len(latencies) * 1000,
    }


def bulk_insert_jobs(users, count):
    """`count` jobs spread over the users and states, inserted in batches."""
    from django.db import connection
    from django.utils import timezone

    from apps.jobs import services
    from apps.jobs.models import Job, JobTag

    template, _ = services.submit_job(users["a"][0][0], JOB_YAML.replace("mnist_single_gpu", "template"))
    owners = users["a"] + users["b"]
    states = ["SUCCEEDED"] * 6 + ["FAILED", "STOPPED", "RUNNING", "WAITING"]
    now = timezone.now()
    batch, tags, made = [], [], 0
    while made < count:
        user, vc = owners[made % len(owners)]
        state = states[made % len(states)]
        batch.append(Job(
            owner=user, tenant_id=vc.tenant_id, virtual_cluster=vc, name=f"bulk_{made}",
            protocol_text=template.protocol_text, spec=template.spec, launch=template.launch,
            state=state, sub_state="Completed" if state in ("SUCCEEDED", "FAILED", "STOPPED") else "AttemptRunning",
            total_gpu=1, total_tasks=1, total_task_roles=1, cell_gpu=1, cell_cpu=8, cell_memory_mb=65536,
            leaf_cells={"A100": 1}, priority_class="test", priority=10,
        ))
        made += 1
        if len(batch) == 5000 or made == count:
            created = Job.objects.bulk_create(batch)
            tags += [JobTag(job=job, name=f"sweep{job.pk % 7}") for job in created[::10]]
            batch = []
    JobTag.objects.bulk_create(tags, batch_size=5000)
    # Spread submission times over 90 days, newest last, as a real history would be.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET submitted_at = %s - (interval '90 days') * (1 - id::float / (SELECT max(id) FROM jobs_job))",
            [now],
        )
        cursor.execute("ANALYZE")


def bench_list(user, query, requests=LIST_REQUESTS):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    for _ in range(10):  # warm-up
        assert client.get(query).status_code == 200
    timings = []
    cpu_started = time.process_time()
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(query)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and len(response.json()) == 100, response.content[:200]
    cpu = (time.process_time() - cpu_started) / requests * 1000
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1], cpu


def main():
    url = database_url("pai_bench")
    print(f"database: {url.rsplit('@', 1)[-1]} (dropped and re-created)")
    recreate_database(url)
    setup_django(url)
    root, users = build_farm()

    # Wall time depends on what else the machine runs; the CPU time this process spends per
    # request (client and server in one process, PostgreSQL's own CPU excluded) does less.
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rate, elapsed, cpu = bench_submissions(users["a"][0][0])
    print(f"submit: {SUBMISSIONS} jobs via POST /api/v2/jobs (text/yaml, DRF APIClient in-process) in "
          f"{elapsed:.2f} s = {rate:.0f} submissions/s with one client waiting for each answer; "
          f"{cpu:.1f} ms CPU per submission, client included")

    http = bench_http_submissions(url, users)
    server_cpu = "n/a" if http["server_cpu"] is None else f"{http['server_cpu']:.1f} ms"
    print(f"submit over HTTP: {HTTP_SUBMISSIONS // HTTP_CLIENTS * HTTP_CLIENTS} jobs via POST /api/v2/jobs "
          f"(gunicorn, {HTTP_WORKERS} sync workers, {'Redis' if REDIS_URL else 'no Redis'}, bearer tokens, "
          f"{HTTP_CLIENTS} client processes at once, all on this machine's {os.cpu_count()} CPUs) in "
          f"{http['elapsed']:.2f} s = {http['rate']:.0f} submissions/s (target ≥ 200); latency p50 {http['p50']:.1f} ms, "
          f"p95 {http['p95']:.1f} ms; CPU per submission: gunicorn {server_cpu}, clients ≤ {http['client_cpu']:.1f} ms")

    from apps.jobs.models import Job

    started = time.perf_counter()
    bulk_insert_jobs(users, JOBS_IN_DATABASE - Job.objects.count())
    print(f"inserted jobs in {time.perf_counter() - started:.1f} s; jobs in database: {Job.objects.count()}")

    for who, user in (("team member", users["a"][3][0]), ("platform admin", root)):
        p50, p95, cpu = bench_list(user, "/api/v2/jobs?limit=100")
        print(f"GET /api/v2/jobs?limit=100 as {who}: p50 {p50:.1f} ms, p95 {p95:.1f} ms "
              f"over {LIST_REQUESTS} requests (target p95 ≤ 100 ms); {cpu:.1f} ms CPU per request")
    # What the web portal asks most besides the plain list: one user's jobs, one state.
    member = users["a"][3][0]
    for query in (f"/api/v2/jobs?limit=100&username={member.username}", "/api/v2/jobs?limit=100&state=RUNNING",
                  "/api/v2/jobs?limit=100&vc=team_a&state=FAILED"):
        p50, p95, _ = bench_list(member, query, LIST_REQUESTS // 4)
        print(f"GET {query} as team member: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {LIST_REQUESTS // 4} requests")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
