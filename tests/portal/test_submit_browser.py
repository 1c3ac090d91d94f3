"""A member submits in headless Chromium: through the simple form; through the YAML editor
with an error first (seen at its field path, then fixed); and by cloning a job. Screenshots
at desktop width and 375 px go to test-artifacts/portal/ (tests/portal/conftest.py)."""

import re

import pytest
from playwright.sync_api import expect

from apps.jobs.models import Job
from tests.jobs.factories import submitted_job

from .test_submit import BAD_GPU, GOOD

pytestmark = pytest.mark.django_db(transaction=True)


def _lands_on_the_job_page(page, portal, name):
    page.wait_for_url(portal.url(f"/jobs/a_member~{name}/"))
    expect(page.locator("main")).to_contain_text(name)


def test_a_member_submits_through_the_form(world, portal):
    page = portal.page(world.a_member)
    page.goto(portal.url("/submit/"))
    expect(page.get_by_label("Virtual cluster")).to_have_value("team_a")
    page.get_by_label("Job name").fill("form-job")
    page.get_by_label("Docker image").fill("ubuntu:22.04")
    page.locator("#id_roles-0-gpu").fill("2")
    page.locator("#id_roles-0-commands").fill("nvidia-smi\necho done")
    portal.shoot(page, "submit-form")
    page.click("#write-yaml")
    expect(page.locator("#check-ok")).to_be_visible()
    expect(page.locator("#id_yaml")).to_have_value(re.compile(r"name: form-job"))
    page.click("#submit")
    _lands_on_the_job_page(page, portal, "form-job")
    job = Job.objects.get(owner=world.a_member, name="form-job")
    assert job.total_gpu == 2 and job.spec["taskRoles"]["worker"]["commands"] == ["nvidia-smi", "echo done"]


def test_a_member_fixes_a_yaml_error_seen_at_its_field_and_submits(world, portal):
    page = portal.page(world.a_member)
    page.goto(portal.url("/submit/"))
    page.locator("#id_yaml").fill(BAD_GPU)
    page.click("#check")
    error = page.locator("#errors li[data-path='taskRoles.worker.resourcePerInstance.gpu']")
    expect(error).to_contain_text("must be an integer ≥ 0")
    expect(page.locator("#where li.bad")).to_contain_text("gpu: -1")
    portal.shoot(page, "submit-yaml-error")
    # The error's line is selected in the editor when the error is clicked.
    error.click()
    selected = page.evaluate("() => { const e = document.getElementById('id_yaml');"
                             " return e.value.slice(e.selectionStart, e.selectionEnd); }")
    assert "gpu: -1" in selected
    # Fixed as it is typed: the check runs without a click.
    page.locator("#id_yaml").fill(GOOD)
    expect(page.locator("#check-ok")).to_be_visible()
    expect(page.locator("#errors")).to_have_count(0)
    page.click("#submit")
    _lands_on_the_job_page(page, portal, "portal-job")
    assert Job.objects.filter(owner=world.a_member, name="portal-job").count() == 1


def test_a_member_clones_a_job(world, portal):
    submitted_job(world.a_member, name="first-run")
    page = portal.page(world.a_member, width=375)
    page.goto(portal.url("/jobs/a_member~first-run/clone"))
    expect(page.locator("#notice")).to_contain_text("Cloned from a_member~first-run")
    expect(page.get_by_label("Job name")).to_have_value("first-run-clone")
    # Readable on a phone: nothing wider than the screen.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    portal.shoot(page, "submit-clone")
    with page.expect_download() as download:
        page.click("#export")
    assert download.value.suggested_filename == "first-run-clone.yaml"
    assert "name: first-run-clone" in open(download.value.path()).read()
    page.click("#submit")
    _lands_on_the_job_page(page, portal, "first-run-clone")
    clone = Job.objects.get(owner=world.a_member, name="first-run-clone")
    assert clone.spec["taskRoles"] == Job.objects.get(name="first-run").spec["taskRoles"]
