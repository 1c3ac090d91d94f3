"""Headless Chromium (Debian's, driven by Playwright) works an incident as a DRI would.

Screenshots of every page land in test-artifacts/oncall/ (git-ignored).
"""

import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from apps.oncall import services
from apps.oncall.choices import IncidentSource, IncidentStatus, TimelineKind
from apps.oncall.models import Incident

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = settings.BASE_DIR / "test-artifacts" / "oncall"


@pytest.fixture
def dri_world(oncall):
    """alice, a DRI, on shift now; one fresh incident and a few past ones for the charts."""
    rotation = oncall.rotation
    rotation.start_date = (timezone.now() - timedelta(days=1)).date()
    rotation.handoff_weekday = rotation.start_date.weekday()
    rotation.save()
    for severity, hours in ((0, 1), (2, 5), (3, 30)):
        past = services.open_incident(title=f"Earlier sev {severity}", severity=severity, source=IncidentSource.ALERT,
                                      cluster=oncall.cluster, now=timezone.now() - timedelta(days=3 + severity))
        services.acknowledge(past, oncall.alice, now=past.triggered_at + timedelta(minutes=10 * (severity + 1)))
        services.resolve(past, oncall.alice, now=past.triggered_at + timedelta(hours=hours))
    oncall.incident = services.open_incident(title="Job submission fails with 500", severity=1,
                                             source=IncidentSource.ALERT, cluster=oncall.cluster)
    return oncall


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_dri_acknowledges_updates_resolves_and_sees_the_dashboard(dri_world, live_server, monkeypatch):
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from playwright.sync_api import expect, sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM work of this test
    # happens before and after the browser session, the pages' on the live server's thread.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=15_000)  # a loaded CI machine renders slowly
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    incident = dri_world.incident
    base = live_server.url
    # pai's only login form is the admin's, which admits admins alone; a DRI who is not
    # one signs in elsewhere (OIDC or the site login), so the test starts from a session.
    client = Client()
    client.force_login(dri_world.alice)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{base}/oncall/")
            expect(page.locator("header")).to_contain_text("alice")
            # The countdown script replaced the server's text with a ticking clock.
            expect(page.locator("#incidents .countdown").first).to_contain_text("ack:")
            expect(page.locator("#incidents .countdown").first).to_contain_text(
                "left" if incident.countdown()["running"] else "paused")
            page.screenshot(path=str(ARTIFACTS / "incident-list.png"), full_page=True)

            page.click(f"text={incident.title}")
            page.wait_for_url(f"{base}/oncall/incidents/{incident.pk}/")
            page.screenshot(path=str(ARTIFACTS / "incident-detail-triggered.png"), full_page=True)
            page.click("#acknowledge")
            expect(page.locator("#incident-status")).to_have_text("Acknowledged")
            page.fill("#update-message", "Rolled back the API server; watching error rates.")
            page.click("#post-update")
            expect(page.locator("#timeline")).to_contain_text("Rolled back the API server")
            page.fill("form[action$='/resolve/'] input[name=message]", "Error rate back to zero.")
            page.click("#resolve")
            expect(page.locator("#incident-status")).to_have_text("Resolved")
            expect(page.locator("#review-form")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "incident-detail-resolved.png"), full_page=True)

            page.goto(f"{base}/oncall/rotations/")
            expect(page.locator(".on-call-now").first).to_contain_text("alice")
            page.screenshot(path=str(ARTIFACTS / "rotations.png"), full_page=True)

            page.goto(f"{base}/oncall/incidents/new/")
            expect(page.locator("form")).to_contain_text("a whole production cluster is unavailable")
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)

            page.goto(f"{base}/oncall/dashboard/")
            charts = page.locator("svg.chart")
            expect(charts).to_have_count(20)
            severity_mtta = page.locator("#by-severity svg[data-metric=mtta] rect.bar")
            expect(severity_mtta).to_have_count(4)
            widths = [severity_mtta.nth(i).bounding_box()["width"] for i in range(4)]
            # Acknowledged after 10, (seconds), 30 and 40 minutes: bars drawn to scale.
            assert all(w > 0 for w in widths)
            assert widths[3] == max(widths) and widths[1] == min(widths) and widths[0] < widths[2]
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

            # A 375 px phone: nothing wider than the screen, no table overflowing its box (the
            # lists reflow into one card per row, each cell under its column's name), the header
            # on three lines (name and user, the portal's links, the on-call links), charts legible.
            page.set_viewport_size({"width": 375, "height": 800})
            for name, path in (("incident-list", "/oncall/"), ("incident-detail", f"/oncall/incidents/{incident.pk}/"),
                               ("rotations", "/oncall/rotations/"), ("dashboard", "/oncall/dashboard/"),
                               ("status", "/oncall/status/"), ("report", "/oncall/incidents/new/")):
                page.goto(f"{base}{path}")
                fit = page.evaluate("""() => ({
                    width: document.documentElement.scrollWidth,
                    header_rows: new Set([...document.querySelectorAll('header strong, header a')]
                        .map(e => Math.round(e.getBoundingClientRect().top))).size,
                    overflowing: [...document.querySelectorAll('main table')].filter(t => t.scrollWidth > t.clientWidth)
                        .map(t => t.id || t.className),
                    chart_font: Math.min(...[...document.querySelectorAll('svg.chart')].map(svg =>
                        13 * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width)),
                })""")
                assert fit["width"] <= 375 and fit["overflowing"] == [], (path, fit)
                assert fit["header_rows"] <= 3, (path, fit)
                if name == "dashboard":
                    assert fit["chart_font"] >= 11, fit  # 13 px labels, drawn no smaller than 11 px
                page.screenshot(path=str(ARTIFACTS / f"{name}-375.png"), full_page=True)
            page.goto(f"{base}/oncall/rotations/")
            starts = page.locator("table.shifts td").nth(1)
            assert starts.evaluate("td => getComputedStyle(td, '::before').content") == '"From: "'
        finally:
            browser.close()

    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE")
    incident = Incident.objects.get(pk=incident.pk)
    assert incident.status == IncidentStatus.RESOLVED and incident.acknowledged_by == dri_world.alice
    assert incident.timeline.filter(kind=TimelineKind.UPDATE, actor=dri_world.alice).exists()
    for name in ("incident-list", "incident-detail-triggered", "incident-detail-resolved", "rotations", "report", "dashboard",
                 "incident-list-375", "dashboard-375"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000
