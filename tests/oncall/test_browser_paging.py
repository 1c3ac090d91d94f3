"""Headless Chromium (Debian's, driven by Playwright): a member reports a severity 0 through the
report page at 03:00 on a Saturday (virtual time), one SLA sweep later the page has reached the
local chat-webhook receiver and the DRI's mailbox, and the DRI on call opens it from the chat
message and sees it on the incident page: clock paused until Monday, page sent anyway.

Screenshots land in test-artifacts/oncall/ (git-ignored)."""

import os
import time
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.oncall import services
from apps.oncall.models import Incident

from .test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from .test_paging import SATURDAY_3AM, hooks, receiver  # noqa: F401 (fixtures)


@pytest.fixture
def saturday_3am(monkeypatch):
    """Django's clock (the live server's thread reads the same function) starts at Saturday
    03:00 UTC and runs on at the real pace; returns a function giving the virtual now."""
    started = time.monotonic()

    def virtual_now():
        return SATURDAY_3AM + timedelta(seconds=time.monotonic() - started)

    monkeypatch.setattr(timezone, "now", virtual_now)
    return virtual_now


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_sev0_reported_in_the_browser_at_3am_saturday_pages_the_dri_within_one_sweep(
        oncall, hooks, receiver, saturday_3am, live_server, monkeypatch):  # noqa: F811
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from playwright.sync_api import expect, sync_playwright

    [dri] = services.rotation_dris(oncall.rotation, saturday_3am())
    assert dri == oncall.alice  # her week runs Monday 5 January 10:00 to Monday 12 January 10:00
    sessions = {}
    for user in (oncall.a_member, dri):
        client = Client()
        client.force_login(user)
        sessions[user.username] = client.cookies[settings.SESSION_COOKIE_NAME].value
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=15_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url

    def page_as(browser, username):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": sessions[username], "url": base}])
        page = context.new_page()
        page.set_default_timeout(15_000)
        return page

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            # A member of team A reports it through the on-call pages.
            member = page_as(browser, oncall.a_member.username)
            member.goto(f"{base}/oncall/incidents/new/")
            member.fill("input[name=title]", "Cluster local: every node NotReady")
            member.fill("textarea[name=description]", "All jobs lost their pods at 02:58.")
            member.check("input[name=severity][value='0']")
            member.select_option("select[name=cluster]", str(oncall.cluster.pk))
            member.click("button[type=submit]")
            member.wait_for_url(f"{base}/oncall/incidents/*/")
            expect(member.locator("body")).to_contain_text("the DRIs on call are notified")
            member.screenshot(path=str(ARTIFACTS / "paging-reported.png"), full_page=True)

            incident = Incident.objects.get(reporter=oncall.a_member)
            assert incident.severity == 0 and incident.cluster == oncall.cluster
            assert SATURDAY_3AM <= incident.triggered_at < SATURDAY_3AM + timedelta(minutes=1)
            # Outside monitoring hours the acknowledge clock waits for Monday morning ...
            assert incident.ack_deadline > SATURDAY_3AM + timedelta(hours=50)

            # ... the page does not: one sweep (the worker's schedule; the task queued when the
            # report was stored has no worker to run it here) reaches every channel.
            services.run_sla_sweep(saturday_3am())
            assert sorted(path for path, _, _ in receiver.posts) == ["/services/T000/B000/XXXX", "/webhookb2/abc"]
            slack = next(body for path, _, body in receiver.posts if path.startswith("/services"))
            teams = next(body for path, _, body in receiver.posts if path.startswith("/webhookb2"))
            assert "Sev 0 on local" in slack["text"] and "every node NotReady" in slack["text"]
            assert "On call: alice" in slack["text"]
            [email] = mail.outbox
            assert email.to == [dri.email] and email.subject.startswith("[pai] Sev 0 on local")

            # The DRI follows the chat message's link and sees the incident.
            link = urlsplit(teams["potentialAction"][0]["targets"][0]["uri"])
            assert link.path == f"/oncall/incidents/{incident.pk}/"
            alice = page_as(browser, dri.username)
            alice.goto(base + link.path)
            expect(alice.locator("h1")).to_contain_text(f"Sev 0 #{incident.pk} Cluster local: every node NotReady")
            expect(alice.locator("#incident-status")).to_have_text("Triggered")
            expect(alice.locator(".countdown").first).to_contain_text("paused: outside monitoring hours")
            expect(alice.locator("time.deadline").first).to_contain_text("Mon 12 Jan")
            expect(alice.locator("#confirm-severity")).to_be_visible()
            alice.screenshot(path=str(ARTIFACTS / "paging-dri.png"), full_page=True)
        finally:
            browser.close()

    # Paged once per channel: another sweep sends nothing more.
    services.run_sla_sweep(saturday_3am())
    assert len(receiver.posts) == 2 and len(mail.outbox) == 1
