"""Headless Chromium (Debian's, driven by Playwright) reads the cluster's capacity as a
platform admin and as a team admin would (issue 15): the table per SKU, chain and cell type,
what each VC holds and what is free; a team admin sees other teams only as "other teams".

Screenshots land in test-artifacts/virtualclusters/ (git-ignored)."""

import os

import pytest
from django.conf import settings
from django.test import Client

from tests.oncall.test_browser import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import close_contexts

ARTIFACTS = settings.BASE_DIR / "test-artifacts" / "virtualclusters"


def _session(user):
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _row(page, sku, cell_type):
    return page.locator(f'table.capacity-table[data-sku="{sku}"] tr.capacity-row[data-cell-type="{cell_type}"]').first


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_admins_read_the_capacity_table_in_a_browser(chromium, world, live_server, monkeypatch):
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: run `make system-deps`"
    from playwright.sync_api import expect

    sessions = {"root": _session(world.root), "a_admin": _session(world.a_admin)}
    expect.set_options(timeout=15_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    browser = chromium
    try:
        root = browser.new_context(viewport={"width": 1280, "height": 900})
        root.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": sessions["root"], "url": base}])
        page = root.new_page()
        page.goto(f"{base}/admin/virtualclusters/virtualcluster/")
        page.click("#capacity-link")
        expect(page.locator('table.capacity-table[data-sku="A100"] caption')).to_have_text(
            "A100: 32 leaf cells, 0 free")
        node = _row(page, "A100", "A100-NODE")
        expect(node.locator("td.cells")).to_have_text("4")
        expect(node.locator("td.guaranteed")).to_have_text("team_a 2, team_b 1")
        expect(node.locator("td.spare")).to_have_text("0")
        page.screenshot(path=str(ARTIFACTS / "capacity-root.png"), full_page=True)

        team = browser.new_context(viewport={"width": 375, "height": 800})
        team.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": sessions["a_admin"], "url": base}])
        page = team.new_page()
        page.goto(f"{base}/admin/virtualclusters/virtualcluster/{world.vc_a.pk}/change/")
        node = _row(page, "A100", "A100-NODE")
        expect(node.locator("td.guaranteed")).to_have_text("team_a 2, other teams 1")
        expect(_row(page, "A100", "A100-SWITCH").locator("td.guaranteed")).to_have_text("other teams 4")
        assert "team_b" not in page.content()
        # At 375 px the table scrolls inside its own box rather than widening the page.
        box = page.locator(".capacity-scroll").first.bounding_box()
        assert box["width"] <= 375, box
        page.screenshot(path=str(ARTIFACTS / "capacity-team-admin-375.png"), full_page=True)
    finally:
        close_contexts(browser)
