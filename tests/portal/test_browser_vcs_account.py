"""The VC, cluster and account journeys in headless Chromium. Jobs are run by the worker on
the local backend, so the VC page shows cells the scheduler really holds and a reason it
really gave. Each page is photographed at desktop and 375 px width into test-artifacts/portal/."""

import re
import time

import pytest
from playwright.sync_api import expect

from apps.jobs import services
from apps.jobs.models import Job
from tests.worker.conftest import Worker, job_yaml

from .conftest import PHONE, UNLABELLED


@pytest.fixture
def worker(world, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    w = Worker(world.cluster)
    yield w
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def cycle_until(worker, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        worker.cycle()
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_member_reads_the_vc_page_and_follows_the_queue_to_a_job(world, portal, worker):
    member = world.a_member
    services.submit_job(member, job_yaml("train", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 60"]}}))
    cycle_until(worker, lambda: Job.objects.filter(name="train", state="RUNNING").exists())
    services.submit_job(member, job_yaml("next", roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}))
    cycle_until(worker, lambda: Job.objects.get(name="next").queue_position is not None)
    reason = Job.objects.get(name="next").wait_reason

    page = portal.page(member)
    page.goto(portal.url("/"))
    # By keyboard: the navigation's "VCs" link, then the VC.
    page.get_by_role("link", name="VCs", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Virtual clusters")
    expect(page.locator("#vcs")).to_contain_text("team_a")
    expect(page.locator("#vcs")).not_to_contain_text("team_b")
    portal.shoot(page, "vc-list")
    page.get_by_role("link", name="team_a").click()
    expect(page.locator("h1")).to_have_text("VC team_a")
    node = page.locator('#cells tr[data-cell-type="A100-NODE"]')
    expect(node.locator("td.guaranteed")).to_have_text("2")
    expect(node.locator("td.used")).to_have_text("2")
    expect(node.locator("td.free")).to_have_text("0")
    queued = page.locator("#queue tbody tr").first
    expect(queued.locator("td").first).to_have_text("1")
    expect(queued).to_contain_text(reason)
    expect(page.locator("#usage")).to_contain_text("a_member")
    portal.shoot(page, "vc-detail")
    queued.get_by_role("link", name="a_member~next").click()
    page.wait_for_url(portal.url("/jobs/a_member~next/"))

    # Platform admins see the cluster: the two busy nodes full, the others free.
    admin = portal.page(world.root)
    admin.goto(portal.url("/vcs/"))
    admin.get_by_role("link", name="Cluster", exact=True).click()
    expect(admin.locator("h1")).to_have_text("Cluster")
    expect(admin.locator(".node .counts").filter(has_text="8 used")).to_have_count(2)
    expect(admin.locator('tr[data-vc="team_a"][data-sku="A100"] td.used')).to_have_text("16")
    portal.shoot(admin, "cluster")

    # Another team's member: no such VC, and no Cluster link.
    other = portal.page(world.b_member)
    response = other.goto(portal.url("/vcs/team_a/"))
    assert response.status == 404
    other.goto(portal.url("/vcs/"))
    expect(other.get_by_role("link", name="Cluster", exact=True)).to_have_count(0)


@pytest.mark.django_db(transaction=True)
def test_member_creates_a_token_uses_it_and_revokes_it(world, portal):
    page = portal.page(world.a_member)
    page.goto(portal.url("/"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="My account").click()
    expect(page.locator("h1")).to_have_text("My account")
    page.get_by_label("Expires").select_option("application")
    page.get_by_role("button", name="Create a token").press("Enter")
    value = page.get_by_label("Token", exact=True)
    expect(value).to_have_attribute("readonly", "")
    token = value.input_value()
    assert len(token) > 20
    portal.shoot(page, "account-new-token")

    api = page.request
    bearer = {"Authorization": f"Bearer {token}"}
    assert api.get(portal.url("/api/v2/jobs"), headers=bearer).status == 200
    me = api.get(portal.url("/api/v2/users/me"), headers=bearer).json()
    assert me["username"] == "a_member"

    page.goto(portal.url("/account/"))
    row = page.locator("#tokens tbody tr").filter(has_text=token[:12])
    expect(row).to_contain_text("application")
    row.get_by_role("button", name=re.compile("Revoke token")).click()
    expect(page.locator(".messages")).to_contain_text("is revoked")
    expect(page.locator("#tokens")).to_contain_text("You have no live token.")
    assert api.get(portal.url("/api/v2/jobs"), headers=bearer).status == 401

    # The default VC, chosen from the VCs the user may submit to.
    expect(page.get_by_role("combobox", name="Default VC").locator("option")).to_have_count(2)  # automatic, team_a
    page.get_by_role("combobox", name="Default VC").select_option("team_a")
    page.get_by_role("button", name="Save the default VC").click()
    expect(page.locator("#default-vc")).to_have_text("team_a")
    portal.shoot(page, "account")


@pytest.mark.django_db(transaction=True)
def test_the_pages_fit_a_375_px_phone(world, portal):
    """Nothing wider than the screen: wide tables scroll in their own box, the page does not;
    every control has a name a screen reader can say."""
    from apps.accounts import services as account_services

    account_services.issue_application_token(world.a_member)
    member, admin = portal.page(world.a_member, width=PHONE), portal.page(world.root, width=PHONE)
    for page, path in ((member, "/vcs/"), (member, "/vcs/team_a/"), (member, "/account/"), (member, "/submit/"),
                       (admin, "/cluster/")):
        page.goto(portal.url(path))
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE, path
        assert page.evaluate(UNLABELLED) == [], path
