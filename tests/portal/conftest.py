"""The portal's browser: Debian's headless Chromium driven by Playwright, shared by every page test.

- `browser`: the suite's one Chromium (`chromium` in tests/conftest.py), shared by every browser test.
- `portal` (per test): `portal.page(user, width=1280)` gives a Page signed in as `user` (None for
  an anonymous visitor) on the live server; `portal.url("/jobs/")` the absolute address;
  `portal.shoot(page, "job-list")` writes `test-artifacts/portal/job-list-desktop.png` and
  `job-list-375.png` (the same page at 1280 and 375 pixels wide, full length).

Tests that use `portal` need the live server to see their rows:
`@pytest.mark.django_db(transaction=True)` (the suite adds serialized_rollback).

"""

import os

import pytest
from django.conf import settings
from django.test import Client

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = settings.BASE_DIR / "test-artifacts" / "portal"
DESKTOP = 1280
PHONE = 375
TIMEOUT_MS = 20_000


# Form controls a screen reader would announce without a name (for `page.evaluate`).
UNLABELLED = """() => Array.from(document.querySelectorAll('input, select, textarea, button'))
    .filter(el => el.type !== 'hidden' && !el.hidden)
    .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim())
    .map(el => el.outerHTML.slice(0, 120))"""


@pytest.fixture
def browser(chromium):
    """The suite's one Chromium (tests/conftest.py)."""
    return chromium


def shoot(page, name):
    """Screenshots of `page` as it is now, at desktop and at 375 px wide, into test-artifacts/portal/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or {"width": DESKTOP, "height": 900}
    for label, width in (("desktop", DESKTOP), (str(PHONE), PHONE)):
        page.set_viewport_size({"width": width, "height": size["height"]})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(size)


class Portal:
    def __init__(self, browser, base):
        self.browser = browser
        self.base = base
        self._contexts = []

    def url(self, path):
        return self.base + path

    def page(self, user=None, width=DESKTOP, height=900):
        """A new browser page (own cookies) signed in as `user`, or anonymous when None."""
        context = self.browser.new_context(viewport={"width": width, "height": height})
        self._contexts.append(context)
        if user is not None:
            client = Client()
            client.force_login(user)
            session = client.cookies[settings.SESSION_COOKIE_NAME].value
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": self.base}])
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        return page

    def shoot(self, page, name):
        shoot(page, name)

    def close(self):
        for context in self._contexts:
            context.close()
        self._contexts.clear()


@pytest.fixture
def portal(browser, live_server):
    p = Portal(browser, live_server.url)
    yield p
    p.close()
