"""The portal's pages on PostgreSQL with 100,000 jobs, served by gunicorn, asked over HTTP.

Prints the p50/p95 render time of each page as a browser gets it (a signed-in session
cookie, one request after another, the connection closed after each as gunicorn's sync
workers do): the job list (a member's own jobs, their team's, a platform admin's "all",
filtered by VC and state, a page deep in the history), a job's page (a running job with
8 tasks, their pod attempts and events), a task's log page, home, a VC's page (and a page
deep in its queue), the VC list, the cluster page and the account page. Target: p95 ≤ 200 ms. Beside each: the CPU gunicorn spent per request (pai's
own cost; PostgreSQL's is not in it).

The database is a dedicated one, dropped and re-created on every run: `BENCH_DATABASE_URL`,
else the server of `DATABASE_URL` with database `pai_bench_pages` (`BENCH_KEEP_DATABASE=1`
keeps the one a previous run filled, which takes minutes to build). gunicorn runs
`BENCH_HTTP_WORKERS` sync workers (1 by default: requests go one at a time) with Redis
`BENCH_REDIS_URL` as cache (database 14 by default, flushed; empty: none). Run with
`make bench` or `.venv/bin/python benchmarks/bench_pages.py`.
"""

import http.client
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("BENCH_HTTP_WORKERS", "1")

from benchmarks import bench_api  # noqa: E402
from benchmarks.pgbench_db import database_url, recreate_database  # noqa: E402

JOBS_IN_DATABASE = int(os.environ.get("BENCH_JOBS", "100000"))
REQUESTS = int(os.environ.get("BENCH_PAGE_REQUESTS", "100"))
TARGET_MS = 200


def running_job_with_tasks(user, data_dir):
    """A running job of `user` with 8 tasks, two pod attempts each, events and a log per task."""
    from django.utils import timezone

    from apps.jobs import services
    from apps.jobs.models import Job, JobAttempt, JobEvent, Task, TaskAttempt

    document = bench_api.JOB_YAML.replace("mnist_single_gpu", "detail_job")
    job, _ = services.submit_job(user, document)
    now = timezone.now()
    attempt = JobAttempt.objects.create(job=job, index=0, state="RUNNING", sub_state="AttemptRunning", launched_at=now)
    log = pathlib.Path(data_dir) / "detail.log"
    log.write_text("".join(f"step {i}: loss {1 / (i + 1):.4f}\n" for i in range(20000)))
    for index in range(8):
        task = Task.objects.create(job_attempt=attempt, task_role="train", index=index, state="RUNNING", retries=1)
        for k in range(2):
            pod = TaskAttempt.objects.create(
                task=task, index=k, state="RUNNING" if k else "FAILED", pod_name=f"{job.debug_id}-train-{index}-{k}",
                pod_uid=f"uid-{index}-{k}", node_name=f"node-{index}", device_indices=[index % 8], ip="10.0.0.5",
                ports={"ssh": 30000 + index}, started_at=now, log_path=str(log),
                exit_code=None if k else 137, completed_at=None if k else now,
            )
            JobEvent.objects.create(
                job=job, task_attempt=pod, uid=f"ev-{index}-{k}", pod_uid=pod.pod_uid, task_role="train",
                task_index=index, type="Normal", reason="Started", message="Started container", first_seen=now,
                last_seen=now, source_component="kubelet", source_host=pod.node_name,
            )
    Job.objects.filter(pk=job.pk).update(state="RUNNING", sub_state="AttemptRunning", launched_at=now, total_tasks=8)
    return job


def session_cookie(user):
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def get(port, path, cookie):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers={"Cookie": cookie, "Host": "localhost"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def measure(server, port, path, cookie, expect):
    for _ in range(5):  # warm-up: templates compiled, connections opened
        status, body = get(port, path, cookie)
        if status != 200 or expect.encode() not in body:
            sys.exit(f"GET {path}: {status}, {expect!r} not in the page:\n{body[:1500].decode(errors='replace')}")
    timings = []
    cpu_before = bench_api._cpu_seconds_of_tree(server.pid)
    for _ in range(REQUESTS):
        started = time.perf_counter()
        status, _ = get(port, path, cookie)
        timings.append((time.perf_counter() - started) * 1000)
        if status != 200:
            sys.exit(f"GET {path}: {status}")
    cpu_after = bench_api._cpu_seconds_of_tree(server.pid)
    cpu = None if cpu_before is None else (cpu_after - cpu_before) / REQUESTS * 1000
    timings.sort()
    return statistics.median(timings), timings[max(0, int(len(timings) * 0.95) - 1)], cpu


def build(url, data_dir):
    """(platform admin, member, the member's job with tasks): a new database, or with
    BENCH_KEEP_DATABASE=1 the one a previous run left (its log file written again)."""
    from django.contrib.auth import get_user_model

    keep = os.environ.get("BENCH_KEEP_DATABASE") == "1"
    if not keep:
        recreate_database(url)
    bench_api.setup_django(url)
    from apps.jobs.models import Job, TaskAttempt

    if keep and Job.objects.count() >= JOBS_IN_DATABASE:
        users = get_user_model().objects
        member = users.get(username="a_user3")
        detail = Job.objects.get(owner=member, name="detail_job")
        log = pathlib.Path(data_dir) / "detail.log"
        log.write_text("".join(f"step {i}: loss {1 / (i + 1):.4f}\n" for i in range(20000)))
        TaskAttempt.objects.filter(task__job_attempt__job=detail).update(log_path=str(log))
        print(f"database kept (BENCH_KEEP_DATABASE=1): {Job.objects.count()} jobs")
        return users.get(username="root"), member, detail
    root, users = bench_api.build_farm()
    add_racks()
    member = users["a"][3][0]
    detail = running_job_with_tasks(member, data_dir)
    started = time.perf_counter()
    bench_api.bulk_insert_jobs(users, JOBS_IN_DATABASE - Job.objects.count())
    # The job with tasks is the member's newest: re-date it after the bulk history.
    from django.utils import timezone

    Job.objects.filter(pk=detail.pk).update(submitted_at=timezone.now())
    # The bulk history rewrote every row (its submission times) and only analysed the table;
    # autovacuum cleans such a table within a minute or two of the change. Vacuum now, so the
    # figures are those of the steady state, not of a table half made of dead rows.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE jobs_job")
    print(f"inserted jobs in {time.perf_counter() - started:.1f} s; jobs in database: {Job.objects.count()}")
    return root, member, detail


def add_racks():
    """The farm's cells and nodes, for the pages that ask the engine (VC and cluster pages):
    8 racks of 8 A100 nodes and 8 CPU nodes, each node a Node row as the backend reports it,
    one of them not ready and one with GPUs held by another pod."""
    from apps.clusters.models import CellType, Cluster, Node, PhysicalCell

    cluster = Cluster.objects.get(name="bench")
    node_type = CellType.objects.get(cluster=cluster, name="A100-NODE")
    cpu_node = CellType.objects.get(cluster=cluster, name="CPU-NODE")
    rack_type = CellType.objects.create(cluster=cluster, name="A100-RACK", child=node_type, child_count=8)
    for r in range(8):
        rack = PhysicalCell.objects.create(cluster=cluster, cell_type=rack_type, address=f"rack-{r}")
        for n in range(8):
            name = f"gpu-{r}-{n}"
            PhysicalCell.objects.create(cluster=cluster, cell_type=node_type, address=name, parent=rack)
            Node.objects.create(cluster=cluster, name=name, gpu_capacity=8, cpu_capacity=64,
                                memory_mb_capacity=524288, ready=name != "gpu-7-7",
                                gpu_used_by_others=2 if name == "gpu-7-6" else 0,
                                cells_used_by_others=2 if name == "gpu-7-6" else 0)
    for n in range(8):
        PhysicalCell.objects.create(cluster=cluster, cell_type=cpu_node, address=f"cpu-{n}")
        Node.objects.create(cluster=cluster, name=f"cpu-{n}", cpu_capacity=32, memory_mb_capacity=131072)


def main():
    url = database_url("pai_bench_pages")
    keep = os.environ.get("BENCH_KEEP_DATABASE") == "1"
    print(f"database: {url.rsplit('@', 1)[-1]}{'' if keep else ' (dropped and re-created)'}")
    data_dir = tempfile.mkdtemp(prefix="pai-bench-pages-")
    os.environ["PAI_DATA_DIR"] = data_dir
    root, member, detail = build(url, data_dir)

    from apps.jobs.models import Job
    oldest = Job.objects.filter(owner=member).order_by("submitted_at", "id").first()
    deep_cursor = f"{round(oldest.submitted_at.timestamp() * 1_000_000) + 1}_{oldest.pk}"

    if bench_api.REDIS_URL:
        import redis

        redis.Redis.from_url(bench_api.REDIS_URL).flushdb()
    member_cookie, root_cookie = session_cookie(member), session_cookie(root)
    job_path = f"/jobs/{member.username}~{detail.name}/"
    pages = [
        ("job list, mine", "/jobs/", member_cookie, "detail_job"),
        ("job list, my team's", "/jobs/?scope=team", member_cookie, 'data-job="'),
        ("job list, all (platform admin)", "/jobs/?scope=all", root_cookie, 'data-job="'),
        ("job list, team's FAILED in team_a", "/jobs/?scope=team&vc=team_a&state=FAILED", member_cookie, "FAILED"),
        ("job list, keyword", f"/jobs/?scope=team&q=bulk_9999", member_cookie, "bulk_9999"),
        ("job list, last page of mine", f"/jobs/?after={deep_cursor}", member_cookie, "Jobs"),
        ("job detail, 8 tasks × 2 attempts", job_path, member_cookie, 'data-task="train-7"'),
        ("task log (64 KiB tail of 300 KiB)", job_path + "attempts/0/tasks/train/0/log", member_cookie, "step 19999"),
        ("home", "/", member_cookie, "detail_job"),
    ]
    # The VC pages: the engine rebuilt from the database, the VC's jobs holding cells summed
    # per user, its queue (a tenth of team_a's 50,000 jobs wait) paged in the engine's order.
    pages += [
        ("VC page", "/vcs/team_a/", member_cookie, 'data-cell-type="A100-NODE"'),
        ("VC page, queue page 60", "/vcs/team_a/?page=60", member_cookie, "Page 60 of"),
        ("VC list", "/vcs/", member_cookie, "team_a"),
        ("VC list (platform admin)", "/vcs/", root_cookie, "team_b"),
        ("cluster page (platform admin)", "/cluster/", root_cookie, 'data-node="'),
        ("my account", "/account/", member_cookie, "Create a token"),
    ]

    port = bench_api._free_port()
    with tempfile.TemporaryFile() as log:
        server = bench_api._start_gunicorn(url, port, log)
        try:
            print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; gunicorn with "
                  f"{bench_api.HTTP_WORKERS} sync worker(s), {'Redis' if bench_api.REDIS_URL else 'no Redis'}; "
                  f"{REQUESTS} requests per page, one after another")
            worst = 0.0
            for label, path, cookie, expect in pages:
                p50, p95, cpu = measure(server, port, path, cookie, expect)
                worst = max(worst, p95)
                cpu_text = "n/a" if cpu is None else f"{cpu:.1f} ms"
                print(f"{label:40} GET {path[:70]:72} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  "
                      f"(gunicorn CPU per request {cpu_text})")
            print(f"worst p95 {worst:.1f} ms (target ≤ {TARGET_MS} ms); load average after: {os.getloadavg()[0]:.1f}")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
