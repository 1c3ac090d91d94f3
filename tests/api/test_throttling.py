"""OpenPAI's request limits through DRF throttling: 429 in OpenPAI's error shape, with Retry-After."""

import pytest
from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from .openpai import assert_error


def test_defaults_are_bursts_per_second():
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    assert rates == {"anon": "50/second", "user": "50/second", "job_submit": "20/second burst 300", "job_list": "10/second"}


@pytest.fixture
def low_rates(monkeypatch):
    # DRF reads the rates once, at import; lower them on the throttle class for the test.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "user": "3/min",
                                                               "anon": "2/min"})


def test_users_are_limited_per_user(world, client_for, low_rates):
    member, other = client_for(world.a_member), client_for(world.b_member)
    for _ in range(3):
        assert member.get("/api/v2/users/me").status_code == 200
    response = member.get("/api/v2/virtual-clusters")
    assert_error(response, 429, "TooManyRequestsError")
    assert int(response["Retry-After"]) > 0
    assert other.get("/api/v2/users/me").status_code == 200


def test_anonymous_clients_are_limited(anonymous, low_rates, db):
    for _ in range(2):
        assert anonymous.get("/api/v2/info").status_code == 200
    assert_error(anonymous.get("/api/v2/info"), 429, "TooManyRequestsError")
