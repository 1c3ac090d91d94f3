"""The VC pages and the cluster page through Django's test client: figures as the engine
and the API count them, the queue in the scheduler's order with its reasons, usage per
user, tenancy (another team's VC answers as a missing one) and bounded queries."""

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.accounts import sharing
from apps.clusters.models import Node, PhysicalCell
from apps.jobs.models import Job
from tests import factories as f
from tests.jobs.factories import submitted_job
from tests.worker.conftest import Worker, job_yaml


def page(user, url):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get(url)


def text(response):
    """The page's text, tags dropped and blanks folded: what a reader sees."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def row_of(html, attr, value):
    match = re.search(rf'<tr [^>]*{attr}="{re.escape(value)}"[^>]*>(.*?)</tr>', html, re.S)
    assert match, f"no row {attr}={value}"
    return match.group(1)


def cell(row, css):
    return int(re.search(rf'class="num {css}">(\d+)<', row).group(1))


@pytest.fixture
def worker(world, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    w = Worker(world.cluster)
    yield w
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def submit(user, text_):
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/v2/jobs", data=text_, content_type="text/yaml")
    assert response.status_code == 202, response.content
    return response


def test_vc_page_shows_the_engines_cells_the_queue_and_the_users(world, worker):
    # team_a is guaranteed 2 A100 nodes (16 GPUs): a 16-GPU job takes them, an 8-GPU one waits.
    submit(world.a_member, job_yaml("big", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 60"]}}))
    submit(world.a_admin, job_yaml("cpu", roles={"main": {"gpu": 0, "commands": ["sleep 60"]}}))
    worker.run_until(lambda: Job.objects.filter(state="RUNNING").count() == 2)
    submit(world.a_member, job_yaml("later", roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}))
    worker.run_until(lambda: Job.objects.get(name="later").queue_position is not None)

    response = page(world.a_member, "/vcs/team_a/")
    assert response.status_code == 200
    html = response.content.decode()
    # Cells by type: exactly the engine's own status of the VC, row by row.
    status = worker.controller.engine.vc_status("team_a")
    assert status.cells, "the engine counts cells of team_a"
    for c in status.cells:
        row = row_of(html, "data-cell-type", c.cell_type)
        assert [cell(row, k) for k in ("guaranteed", "used", "borrowed", "lent", "bad", "free")] == [
            c.guaranteed, c.used, c.borrowed, c.lent, c.bad, c.free]
    node_row = row_of(html, "data-cell-type", "A100-NODE")
    assert (cell(node_row, "guaranteed"), cell(node_row, "used"), cell(node_row, "free")) == (2, 2, 0)
    # The summary is the API's VC object.
    api = APIClient()
    api.force_authenticate(world.a_member)
    vc = api.get("/api/v2/virtual-clusters/team_a").json()
    shown = text(response)
    assert f"{vc['resourcesUsed']['gpu']} GPUs, {vc['resourcesUsed']['cpu']} CPUs" in shown
    assert vc["resourcesUsed"]["gpu"] == 16
    # The queue: the waiting job with the position and the reason the API's job detail shows.
    detail = api.get("/api/v2/jobs/a_member~later").json()["jobStatus"]
    assert detail["queuePosition"] == 1 and detail["waitReason"]
    queue = re.search(r'<table id="queue">(.*?)</table>', html, re.S).group(1)
    assert '<a href="/jobs/a_member~later/">a_member~later</a>' in queue
    assert re.sub(r"\s+", " ", detail["waitReason"]) in re.sub(r"\s+", " ", queue.replace("&#x27;", "'"))
    assert re.search(r'<td class="num">1</td>\s*<td>.*a_member~later', queue, re.S)
    # Usage per user: what each user's jobs hold and how many wait.
    usage = re.search(r'<table id="usage">(.*?)</table>', html, re.S).group(1)
    rows = {re.search(r"<td>(\w+)</td>", r).group(1): [int(n) for n in re.findall(r'class="num">(\d+)<', r)]
            for r in re.findall(r"<tr>(.*?)</tr>", usage, re.S) if "<td>" in r}
    assert rows["a_member"] == [1, 16, 128, 1048576]
    assert rows["a_admin"] == [1, 0, 4, 16384]  # one CPU cell

    # The cluster page counts the same devices: 16 A100 used on the two nodes the big job holds.
    cluster = text(page(world.root, "/cluster/"))
    totals = re.search(r"(\d+) devices: (\d+) used, (\d+) free, (\d+) bad", cluster).groups()
    assert int(totals[1]) == 16 + 1  # the CPU job holds one CPU cell


def test_borrowed_and_lent_cells_show_on_both_vcs_pages(world, worker):
    # team_a and team_b share a cohort: team_a's jobs take its 2 A100 nodes, and one more
    # borrows one of team_b's idle ones.
    from apps.virtualclusters.models import VirtualCluster

    VirtualCluster.objects.filter(name__in=["team_a", "team_b"]).update(cohort="shared")
    submit(world.a_member, job_yaml("big", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 60"]}}))
    submit(world.a_member, job_yaml("more", roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}))
    worker.run_until(lambda: Job.objects.filter(name__in=["big", "more"], state="RUNNING").count() == 2)
    status = {name: worker.controller.engine.vc_status(name) for name in ("team_a", "team_b")}
    borrower = row_of(page(world.a_member, "/vcs/team_a/").content.decode(), "data-cell-type", "A100-NODE")
    lender = row_of(page(world.b_member, "/vcs/team_b/").content.decode(), "data-cell-type", "A100-NODE")
    kinds = ("guaranteed", "used", "borrowed", "lent", "bad", "free")
    assert [cell(borrower, k) for k in kinds] == [2, 2, 1, 0, 0, 0]
    assert [cell(lender, k) for k in kinds] == [1, 0, 0, 1, 0, 0]  # team_b: 1 node and 4 switches of 2 GPUs
    # As the engine counts them.
    node = {name: next(c for c in s.cells if c.cell_type == "A100-NODE") for name, s in status.items()}
    assert [getattr(node["team_a"], k) for k in kinds] == [2, 2, 1, 0, 0, 0]
    assert [getattr(node["team_b"], k) for k in kinds] == [1, 0, 0, 1, 0, 0]
    # Home's table of the borrower's VCs says so too.
    home = row_of(page(world.a_member, "/").content.decode().split('id="vcs"')[1], "data-cell-type", "A100-NODE")
    assert '<td class="borrowed">1</td>' in home


def test_another_teams_vc_answers_as_a_missing_one(world):
    assert page(world.b_member, "/vcs/team_a/").status_code == 404
    hidden, missing = page(world.b_member, "/vcs/team_a/"), page(world.b_member, "/vcs/no_such_vc/")
    assert hidden.content.replace(b"team_a", b"no_such_vc") == missing.content
    listed = text(page(world.b_member, "/vcs/"))
    assert "team_b" in listed and "team_a" not in listed
    assert page(None, "/vcs/team_a/").status_code == 302
    assert page(world.root, "/vcs/team_a/").status_code == 200
    assert page(world.a_member, "/vcs/team_a/").status_code == 200


def test_a_shared_vc_hides_the_other_teams_jobs_and_users(world):
    guests = f.GroupFactory(name="team_b_guests", tenant=world.tenant_b)
    world.b_member.groups.add(guests)
    sharing.share_with_group(world.a_admin, world.vc_a, guests)
    submitted_job(world.a_member, name="secret_experiment", vc="team_a")
    submitted_job(world.a_member, name="secret_training", vc="team_a")
    submitted_job(world.b_member, name="guest_job", vc="team_a")
    # One of Team A's jobs holds a cell (as the worker leaves a started job): counted, not named.
    Job.objects.filter(name="secret_training").update(state="RUNNING", cell_gpu=1, cell_cpu=8, cell_memory_mb=65536)

    response = page(world.b_member, "/vcs/team_a/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "secret_" not in html and "a_member" not in html
    assert "a job of another team" in html and ">b_member~guest_job</a>" in html
    usage = re.search(r'<table id="usage">(.*?)</table>', html, re.S).group(1)
    assert re.search(r'<td class="muted">other teams</td><td class="num">1</td><td class="num">1</td>', usage)
    # A job belongs to its VC's team: Team A's members see both jobs by name, as in the job list.
    own = page(world.a_member, "/vcs/team_a/").content.decode()
    assert ">b_member~guest_job<" in own and ">a_member~secret_experiment<" in own
    assert re.search(r"<td>a_member</td><td class=\"num\">1</td><td class=\"num\">1</td>", own)


def _queries(user, url):
    client = Client()
    client.force_login(user)
    client.get(url)  # the session and role caches warm up
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def _copies(job, names):
    """More waiting jobs like `job` (a submitted one), written at once."""
    fields = {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields if f.attname not in ("id", "name")}
    Job.objects.bulk_create([Job(name=name, **fields) for name in names])


def test_the_queue_is_paged_and_the_page_costs_the_same_queries_whatever_its_length(world):
    first_job = submitted_job(world.a_member, name="w0", vc="team_a")
    _copies(first_job, ["w1", "w2"])
    few = _queries(world.a_member, "/vcs/team_a/")
    _copies(first_job, [f"w{i}" for i in range(3, 120)])
    assert _queries(world.a_member, "/vcs/team_a/") == few
    first = page(world.a_member, "/vcs/team_a/").content.decode()
    assert "Queue (120 waiting)" in first and "Page 1 of 3" in first
    assert first.count(">a_member~w") == 50
    last = page(world.a_member, "/vcs/team_a/?page=3").content.decode()
    assert last.count(">a_member~w") == 20 and ">a_member~w119<" in last
    assert page(world.a_member, "/vcs/team_a/?page=nonsense").status_code == 200


def test_cluster_page_groups_nodes_by_rack_and_counts_bad_devices(world):
    Node.objects.filter(name="gpu-node-4").update(ready=False)
    # As the worker records another scheduler's pod holding 3 devices: the devices, and the cells they keep.
    Node.objects.filter(name="gpu-node-3").update(gpu_used_by_others=3, cells_used_by_others=3)
    response = page(world.root, "/cluster/")
    assert response.status_code == 200
    html = response.content.decode()
    rack = re.search(r'data-rack="rack-1"(.*?)</ul>', html, re.S).group(1)
    assert [n for n in re.findall(r'data-node="([\w-]+)"', rack)] == [f"gpu-node-{i}" for i in range(1, 5)]
    node4 = re.search(r'data-node="gpu-node-4"(.*?)</li>', html, re.S).group(1)
    assert "0 used · 0 free · 8 bad" in node4 and "not healthy" in node4
    node3 = re.search(r'data-node="gpu-node-3"(.*?)</li>', html, re.S).group(1)
    assert "0 used · 5 free · 0 bad" in node3 and "3 held by other pods" in node3
    assert "32 devices" not in html and "48 devices: 0 used, 37 free, 8 bad, 3 held by pods that are not pai's." in html
    node1 = re.search(r'data-node="gpu-node-1"(.*?)</li>', html, re.S).group(1)
    assert "0 used · 8 free · 0 bad" in node1
    assert "CPU-NODE nodes" in html  # the CPU nodes belong to no rack
    # Per-VC bars: team_a is guaranteed 16 A100, team_b 16 (a node and four switches).
    for vc in ("team_a", "team_b"):
        bar = re.search(rf'<tr data-vc="{vc}" data-sku="A100">(.*?)</tr>', html, re.S).group(1)
        assert re.findall(r'class="num[^"]*">(\d+)<', bar)[:2] == ["16", "0"]
    # Members and team admins: forbidden, as the other platform-admin routes; no nav link either.
    assert page(world.a_admin, "/cluster/").status_code == 403
    assert page(world.a_member, "/cluster/").status_code == 403
    assert page(None, "/cluster/").status_code == 302
    assert 'href="/cluster/"' not in page(world.a_member, "/vcs/").content.decode()
    assert 'href="/cluster/"' in page(world.root, "/vcs/").content.decode()


def test_a_configuration_the_engine_refuses_is_said_not_hidden(world):
    # Three A100 nodes left cannot back team_a's 2 nodes and team_b's node and four switches.
    PhysicalCell.objects.filter(address="gpu-node-4").delete()
    response = page(world.a_member, "/vcs/team_a/")
    assert response.status_code == 200
    shown = text(response)
    assert "The scheduler cannot use this cluster's configuration:" in shown
    assert "Queue (0 waiting)" in shown  # the rest of the page still reads the database
    cluster = text(page(world.root, "/cluster/"))
    assert "The scheduler cannot use this cluster's configuration:" in cluster
