"""Home in the browser: a member sees their jobs and VCs; the page reads at 375 px without
sideways scrolling of the page itself; the navigation is reachable by keyboard."""

import pytest
from playwright.sync_api import expect

from tests.jobs.factories import running_attempt, submitted_job

from .conftest import PHONE


@pytest.mark.django_db(transaction=True)
def test_member_home_at_desktop_and_phone_width(world, portal):
    running_attempt(submitted_job(world.a_member, name="resnet_train", vc="team_a"))
    submitted_job(world.a_member, name="bert_queue", vc="team_a")
    page = portal.page(world.a_member)
    page.goto(portal.url("/"))
    expect(page.locator("#running")).to_contain_text("resnet_train")
    expect(page.locator("#waiting")).to_contain_text("bert_queue")
    expect(page.locator('table.vc-cells[data-vc="team_a"]')).to_be_visible()
    expect(page.locator("link[rel=icon]")).to_have_count(1)
    assert page.request.get(portal.url(page.locator("link[rel=icon]").get_attribute("href"))).ok
    # Keyboard: Tab from the top reaches the Jobs link of the navigation.
    page.keyboard.press("Tab")
    for _ in range(6):
        if page.evaluate("document.activeElement.textContent") == "Jobs":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Jobs"
    portal.shoot(page, "home")
    phone = portal.page(world.a_member, width=PHONE)
    phone.goto(portal.url("/"))
    expect(phone.locator("#running")).to_contain_text("resnet_train")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE
