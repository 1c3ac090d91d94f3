"""A team admin onboards a member in headless Chromium (Debian's, driven by Playwright) and sees
them on the team's page with their groups and the e-mail's state; then opens the e-mail's
set-password link as the new member would."""

import os
import re

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client
from tests.conftest import close_contexts

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = settings.BASE_DIR / "test-artifacts" / "tenants"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_team_admin_onboards_a_member_and_sees_them_on_the_team_page(chromium, world, live_server, monkeypatch):
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    client = Client()
    client.force_login(world.a_admin)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    browser = chromium
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{base}/admin/tenants/tenant/{world.tenant_a.pk}/change/")
        expect(page.locator('#members tr.member[data-username="a_member"] .groups')).to_contain_text("team_a")
        page.click("#onboard-user")
        # The team's one VC-granting group is ticked already.
        expect(page.locator("input[name=groups]:checked")).to_have_count(1)
        page.fill("input[name=username]", "zoe")
        page.fill("input[name=email]", "zoe@example.com")
        page.fill("input[name=first_name]", "Zoe")
        page.click("input[type=submit]")
        expect(page.locator(".messagelist")).to_contain_text("Onboarded zoe")
        row = page.locator('#members tr.member[data-username="zoe"]')
        expect(row.locator(".groups")).to_have_text("default, team_a")
        expect(row.locator(".onboarding-state")).to_contain_text("Sent")
        page.screenshot(path=str(ARTIFACTS / "team-page.png"), full_page=True)

        [message] = mail.outbox
        link = re.search(r"http://\S+/accounts/reset/\S+", message.body).group(0)
        visitor = browser.new_context(viewport={"width": 375, "height": 800}).new_page()
        visitor.goto(link)
        expect(visitor.locator("h1")).to_have_text("Choose your password")
        expect(visitor.locator("body")).not_to_contain_text("Django administration")
        visitor.screenshot(path=str(ARTIFACTS / "set-password-375.png"), full_page=True)
    finally:
        close_contexts(browser)
