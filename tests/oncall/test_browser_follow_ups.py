"""Headless Chromium (Debian's, driven by Playwright): a DRI turns a follow-up into a GitHub
issue (a fake GitHub checking GitHub's description, in a thread of this process) and sees it
done once the issue is closed; she reads the deadline in her own time zone, at 375 px too.

Screenshots land in test-artifacts/oncall/ (git-ignored)."""

import os

import pytest
from django.conf import settings
from django.test import Client
from django.utils import dateformat

from apps.oncall import github
from apps.oncall import services as oncall_services
from apps.oncall.models import FollowUp, GitHubRepository

from .fake_github import FakeGitHub
from .test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

TOKEN = "github_pat_browser"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_dri_turns_a_follow_up_into_an_issue_and_sees_it_done_when_it_closes(oncall, live_server, monkeypatch,
                                                                                 tasks_inline):
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from zoneinfo import ZoneInfo

    from playwright.sync_api import expect, sync_playwright

    fake = FakeGitHub(token=TOKEN).start()
    setting = GitHubRepository(api_url=fake.api_url, repository="octo-org/cluster-ops", labels="incident-follow-up")
    setting.token = TOKEN
    setting.save()
    incident = oncall_services.report_incident(oncall.root, title="GPU lost on gpu-node-1", severity=1)
    follow_up = oncall_services.add_follow_up(incident, oncall.root, title="Replace the GPU", owner=oncall.root)
    deadline = incident.countdown()["deadline"]
    client = Client()
    client.force_login(oncall.root)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=15_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
                page = context.new_page()
                page.goto(f"{base}/oncall/incidents/{incident.pk}/")

                # Her time zone, from the link on every on-call page, and back to the incident.
                page.click("#time-zone-link")
                page.select_option("select[name=time_zone]", "Asia/Tokyo")
                page.click("text=Save")
                page.wait_for_url(f"{base}/oncall/incidents/{incident.pk}/")
                tokyo = dateformat.format(deadline.astimezone(ZoneInfo("Asia/Tokyo")), "D j M H:i T")
                expect(page.locator("time.deadline").first).to_have_text(f"due {tokyo}")

                page.click("text=Create GitHub issue")
                page.wait_for_url(f"{base}/oncall/incidents/{incident.pk}/")
                link = page.locator("#follow-ups .github-issue a")
                expect(link).to_have_text("octo-org/cluster-ops#1")
                expect(link).to_have_attribute("href", "https://github.example/octo-org/cluster-ops/issues/1")
                page.screenshot(path=str(ARTIFACTS / "follow-up-issue.png"), full_page=True)

                fake.close_issue(1)
                assert github.sweep() == (0, 1)
                page.reload()
                expect(page.locator("#follow-ups")).to_contain_text("(closed)")
                expect(page.locator("#follow-ups button", has_text="Mark done")).to_have_count(0)
                expect(page.locator("#follow-ups tr", has_text="Replace the GPU").locator("td").last).to_have_text("done")

                # At 375 px the follow-ups table stays inside the screen (it scrolls in its own box).
                page.set_viewport_size({"width": 375, "height": 800})
                page.reload()
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= 375, width
                page.screenshot(path=str(ARTIFACTS / "follow-up-issue-375.png"), full_page=True)
            finally:
                browser.close()
    finally:
        fake.stop()
        monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE")
    follow_up = FollowUp.objects.get(pk=follow_up.pk)
    assert follow_up.done and follow_up.issue_number == 1
    assert len(fake.issues) == 1 and fake.violations == []
