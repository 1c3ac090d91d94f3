"""Deadlines as absolute times in the viewer's own time zone (issue 15): a per-user
preference, set on the time-zone page, kept across sign-ins, used by every on-call page."""

from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import dateformat

from apps.accounts.models import UserProfile
from apps.oncall import services as oncall_services

pytestmark = pytest.mark.django_db


def _signed_in(user):
    client = Client()
    client.force_login(user)
    return client


def _shown(deadline, zone):
    return "due " + dateformat.format(deadline.astimezone(ZoneInfo(zone)), "D j M H:i T")


def test_each_viewer_sees_the_deadline_in_their_own_zone(world):
    incident = oncall_services.report_incident(world.a_member, title="GPU lost on gpu-node-1", severity=1)
    deadline = incident.countdown()["deadline"]
    tokyo = _signed_in(world.root)

    response = tokyo.post("/accounts/time-zone/", {"time_zone": "Asia/Tokyo", "next": f"/oncall/incidents/{incident.pk}/"})

    assert response.status_code == 302 and response["Location"] == f"/oncall/incidents/{incident.pk}/"
    page = tokyo.get(f"/oncall/incidents/{incident.pk}/").content.decode()
    assert _shown(deadline, "Asia/Tokyo") in page and " JST" in page
    assert f'datetime="{deadline.astimezone(ZoneInfo("Asia/Tokyo")).isoformat()}"' in page
    listed = tokyo.get("/oncall/").content.decode()
    assert _shown(deadline, "Asia/Tokyo") in listed
    # Another viewer, with no preference, sees the platform's zone (UTC).
    other = _signed_in(world.a_member).get(f"/oncall/incidents/{incident.pk}/").content.decode()
    assert _shown(deadline, "UTC") in other and _shown(deadline, "Asia/Tokyo") not in other


def test_the_zone_is_kept_for_the_next_sign_in_and_can_be_cleared(world):
    _signed_in(world.a_member).post("/accounts/time-zone/", {"time_zone": "America/Los_Angeles"})
    assert UserProfile.objects.get(user=world.a_member).time_zone == "America/Los_Angeles"

    later = _signed_in(world.a_member)
    page = later.get("/oncall/status/").content.decode()
    assert "Times in PST" in page or "Times in PDT" in page

    later.post("/accounts/time-zone/", {"time_zone": ""})
    assert UserProfile.objects.get(user=world.a_member).time_zone == ""
    assert "Times in UTC" in later.get("/oncall/status/").content.decode()


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "x" * 300])
def test_a_zone_that_does_not_exist_is_refused_on_the_form(world, zone):
    response = _signed_in(world.a_member).post("/accounts/time-zone/", {"time_zone": zone})
    assert response.status_code == 200
    assert "Select a valid choice." in response.content.decode()
    assert not UserProfile.objects.filter(user=world.a_member).exclude(time_zone="").exists()


def test_the_page_never_sends_the_browser_to_another_site(world):
    response = _signed_in(world.a_member).post("/accounts/time-zone/", {
        "time_zone": "Europe/Paris", "next": "https://evil.example/"})
    assert response["Location"] == "/accounts/time-zone/"


def test_anonymous_visitors_are_sent_to_sign_in(client):
    response = client.get("/accounts/time-zone/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
