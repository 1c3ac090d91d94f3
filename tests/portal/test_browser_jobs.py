"""The researchers' journeys through the job pages in headless Chromium, with jobs run for real
by the worker on the local backend: a member watches a job reach SUCCEEDED on its page (which
refreshes itself) and reads its log, sees why a failed job ended, why a waiting job waits and
where it stands, follows a running task's log live and stops the job from the list (and
finds its way there from home, by keyboard too); a team
admin stops a member's job; another team's member gets 404 on every page of it. Each page is
photographed at desktop and 375 px width into test-artifacts/portal/.

Each test takes seconds, not one: the jobs run as real processes through the worker's
cycles, and the pages are read as the browser renders them; the journeys share them."""

import time

import pytest
from playwright.sync_api import expect

from apps.jobs.models import Job
from tests.worker.conftest import Worker, job_yaml

from .conftest import PHONE, UNLABELLED


@pytest.fixture
def worker(world, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    settings.PAI_PORTAL_REFRESH_SECONDS = 1
    w = Worker(world.cluster)
    yield w
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def submit(user, name, **fields):
    from apps.jobs import services

    job, _ = services.submit_job(user, job_yaml(name, **fields))
    return job


def cycle_until(worker, predicate, timeout=30.0):
    """Run the worker's cycles until `predicate()` holds; the browser keeps going meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        worker.cycle()
        time.sleep(0.2)


def state_of(job):
    return Job.objects.get(pk=job.pk).state


def detail(portal, job):
    return portal.url(f"/jobs/{job.owner.username}~{job.name}/")


@pytest.mark.django_db(transaction=True)
def test_member_watches_reads_diagnoses_waits_follows_and_stops(world, portal, worker):
    member = world.a_member
    hello = submit(member, "hello", roles={"main": {"commands": ["echo epoch 1 loss 0.50",
                                                                 "echo training done"]}})
    crash = submit(member, "crash", roles={"main": {"commands": ["echo loading data", "echo bad shard 7 >&2",
                                                                 "exit 3"]}})
    page = portal.page(member)
    # Home: the waiting jobs, the VC's cells, a favicon; the navigation is reachable by keyboard.
    page.goto(portal.url("/"))
    expect(page.locator("#waiting")).to_contain_text("hello")
    expect(page.locator('table.vc-cells[data-vc="team_a"]')).to_be_visible()
    assert page.request.get(portal.url(page.locator("link[rel=icon]").get_attribute("href"))).ok
    for _ in range(8):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Jobs":
            break
    assert page.evaluate("document.activeElement.textContent") == "Jobs"
    portal.shoot(page, "home")
    page.goto(detail(portal, hello))
    expect(page.locator("#job-state")).to_have_text("WAITING")
    portal.shoot(page, "job-detail-waiting")
    # The page refreshes itself while the job runs: no reload here.
    cycle_until(worker, lambda: state_of(hello) in ("SUCCEEDED", "FAILED") and state_of(crash) in ("SUCCEEDED", "FAILED"))
    expect(page.locator("#job-state")).to_have_text("SUCCEEDED")
    expect(page.locator("#timeline li.done")).to_have_count(4)
    portal.shoot(page, "job-detail-succeeded")
    page.get_by_role("link", name="Log of main[0]").click()
    expect(page.locator("#log")).to_contain_text("epoch 1 loss 0.50")
    expect(page.locator("#log")).to_contain_text("training done")
    with page.expect_download() as download:
        page.locator("#download").click()
    assert "training done" in open(download.value.path()).read()
    portal.shoot(page, "task-log")

    # The failed job says why, which task ended it, what to do, and shows the end of its log.
    page.goto(detail(portal, crash))
    expect(page.locator("#job-state")).to_have_text("FAILED")
    diagnosis = page.locator("#diagnosis")
    expect(diagnosis.locator("#exit-code")).to_have_text("3")
    expect(diagnosis.locator("#trigger-task")).to_have_text("main[0]")
    expect(diagnosis.locator("#exit-solution li").first).to_be_visible()
    expect(diagnosis.locator("#diagnosis-log")).to_contain_text("loading data")
    portal.shoot(page, "job-detail-failed")

    # A job holding all of team_a's A100 cells; the next one waits, and says why and where.
    big = submit(member, "big", roles={"main": {"instances": 2, "gpu": 8,
                                                "commands": ["echo started $PAI_TASK_INDEX", "sleep 120"]}})
    cycle_until(worker, lambda: state_of(big) == "RUNNING")
    queued = submit(member, "queued", roles={"main": {"gpu": 8, "commands": ["sleep 1"]}})
    cycle_until(worker, lambda: Job.objects.get(pk=queued.pk).queue_position is not None)
    page.goto(detail(portal, queued))
    expect(page.locator("#queue-position")).to_have_text("1")
    expect(page.locator("#wait-reason")).not_to_be_empty()
    assert page.locator("#wait-reason").text_content() != "The scheduler has not considered it yet."
    portal.shoot(page, "job-detail-queued")

    # Follow the running task's log live: lines written later appear without a reload.
    page.goto(portal.url("/jobs/a_member~big/attempts/0/tasks/main/0/log"))
    page.locator("#follow").click()
    expect(page.locator("#log")).to_contain_text("started 0")
    expect(page.locator("#log-status")).to_contain_text("Following")

    # Stop it from the list; the queued job then gets the cells.
    page.goto(portal.url("/jobs/"))
    expect(page.locator("#jobs tbody tr")).to_have_count(4)
    portal.shoot(page, "job-list")
    page.get_by_role("button", name="Stop a_member~big").click()
    expect(page.locator(".messages")).to_contain_text("Stopping job a_member~big.")
    cycle_until(worker, lambda: state_of(big) == "STOPPED" and state_of(queued) in ("RUNNING", "SUCCEEDED"))
    page.goto(detail(portal, big))
    expect(page.locator("#job-state")).to_have_text("STOPPED")
    expect(page.locator("#stop")).to_have_count(0)
    # Re-submit the stopped job as it is: its copy waits on a page of its own.
    page.locator("#resubmit").click()
    page.wait_for_url(portal.url("/jobs/a_member~big_1/"))
    expect(page.locator(".messages")).to_contain_text("Cloned a_member~big as a_member~big_1.")
    expect(page.locator("#job-state")).to_have_text("WAITING")

    phone = portal.page(member, width=PHONE)
    for path in ("/", "/jobs/", "/jobs/a_member~crash/", "/jobs/a_member~hello/attempts/0/tasks/main/0/log"):
        phone.goto(portal.url(path))
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE, path
        assert phone.evaluate(UNLABELLED) == [], path


@pytest.mark.django_db(transaction=True)
def test_team_admin_stops_a_members_job_and_another_team_gets_404(world, portal, worker):
    job = submit(world.a_member, "long_run", roles={"main": {"commands": ["echo hi", "sleep 120"]}})
    cycle_until(worker, lambda: state_of(job) == "RUNNING")
    outsider = portal.page(world.b_member)
    log = "/jobs/a_member~long_run/attempts/0/tasks/main/0/log"
    for path in ("/jobs/a_member~long_run/", "/jobs/a_member~long_run/clone", log, log + "?download=1",
                 log + "?offset=0"):
        assert outsider.goto(portal.url(path)).status == 404, path
    outsider.goto(portal.url("/jobs/?scope=team"))
    expect(outsider.locator('tr[data-job="a_member~long_run"]')).to_have_count(0)
    for action in ("stop", "resubmit"):
        status = outsider.evaluate("""async (action) => {
            const token = document.querySelector('input[name=csrfmiddlewaretoken]').value;
            const r = await fetch('/jobs/a_member~long_run/' + action, {method: 'POST', headers: {'X-CSRFToken': token}});
            return r.status; }""", action)
        assert status == 404, action
    assert state_of(job) == "RUNNING" and Job.objects.count() == 1

    admin = portal.page(world.a_admin)
    admin.goto(portal.url("/jobs/?scope=team"))
    admin.locator('tr[data-job="a_member~long_run"]').get_by_role("link", name="long_run", exact=True).click()
    expect(admin.locator("#job-state")).to_have_text("RUNNING")
    admin.locator("#stop").click()
    expect(admin.locator(".messages")).to_contain_text("Stopping job a_member~long_run.")
    cycle_until(worker, lambda: state_of(job) == "STOPPED")
    expect(admin.locator("#job-state")).to_have_text("STOPPED")  # refreshed by itself
