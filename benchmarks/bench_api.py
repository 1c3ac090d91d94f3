"""Job API throughput and latency on PostgreSQL.

Prints (1) job submissions per second through `POST /api/v2/jobs` (YAML bodies, DRF's
APIClient in-process: the full Django/DRF stack without an HTTP server), and (2) the
p50/p95 latency of `GET /api/v2/jobs?limit=100` with 100,000 jobs in the database, for
a team member and for a platform admin. Targets: ≥ 200 submissions/s, p95 ≤ 100 ms.

The database is a dedicated one, dropped and re-created on every run: `BENCH_DATABASE_URL`,
else the server of `DATABASE_URL` (else 127.0.0.1:5432, user postgres) with database
`pai_bench`. Run with `make bench` or `.venv/bin/python benchmarks/bench_api.py`.
"""

import logging
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402

SUBMISSIONS = int(os.environ.get("BENCH_SUBMISSIONS", "1000"))
JOBS_IN_DATABASE = int(os.environ.get("BENCH_JOBS", "100000"))
LIST_REQUESTS = int(os.environ.get("BENCH_LIST_REQUESTS", "200"))


def setup_django(url):
    os.environ["DATABASE_URL"] = url
    os.environ["DEBUG"] = "0"
    # The benchmark measures the service, not the rate limits.
    for name in ("PAI_THROTTLE_API", "PAI_THROTTLE_JOB_SUBMIT", "PAI_THROTTLE_JOB_LIST"):
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


def bench_list(user, query):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    for _ in range(10):  # warm-up
        assert client.get(query).status_code == 200
    timings = []
    cpu_started = time.process_time()
    for _ in range(LIST_REQUESTS):
        started = time.perf_counter()
        response = client.get(query)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and len(response.json()) == 100, response.content[:200]
    cpu = (time.process_time() - cpu_started) / LIST_REQUESTS * 1000
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
          f"{elapsed:.2f} s = {rate:.0f} submissions/s (target ≥ 200); {cpu:.1f} ms CPU per submission")

    from apps.jobs.models import Job

    started = time.perf_counter()
    bulk_insert_jobs(users, JOBS_IN_DATABASE - Job.objects.count())
    print(f"inserted jobs in {time.perf_counter() - started:.1f} s; jobs in database: {Job.objects.count()}")

    for who, user in (("team member", users["a"][3][0]), ("platform admin", root)):
        p50, p95, cpu = bench_list(user, "/api/v2/jobs?limit=100")
        print(f"GET /api/v2/jobs?limit=100 as {who}: p50 {p50:.1f} ms, p95 {p95:.1f} ms "
              f"over {LIST_REQUESTS} requests (target p95 ≤ 100 ms); {cpu:.1f} ms CPU per request")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
