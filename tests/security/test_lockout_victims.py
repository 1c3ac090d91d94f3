"""Brute force against a user must not lock the user out: failures count per (user, address),
per user only against addresses the user never signed in from (with a doubling backoff), and
per address only against users it is new to; counters live in the database, shared by every
process, not in one process's memory."""

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import LoginThrottle
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

ATTACKER, HOME, ELSEWHERE = "203.0.113.66", "10.20.0.5", "198.51.100.9"


def _login(address, username, password, **headers):
    return APIClient(REMOTE_ADDR=address, **headers).post(
        "/api/v2/authn/basic/login", {"username": username, "password": password}, format="json")


@pytest.fixture
def signed_in_before(world):
    """a_member and root (a platform admin) have signed in from their usual address."""
    for name in ("a_member", "root"):
        assert _login(HOME, name, PASSWORD).status_code == 200
    return world


@pytest.mark.parametrize("victim", ["a_member", "root"])
def test_ten_wrong_passwords_from_an_attacker_do_not_lock_the_victim_out(signed_in_before, victim):
    for _ in range(10):
        assert _login(ATTACKER, victim, "guess").status_code == 400

    assert _login(ATTACKER, victim, PASSWORD).status_code == 429
    assert _login(HOME, victim, PASSWORD).status_code == 200
    assert _login(ELSEWHERE, victim, PASSWORD).status_code == 200


def test_a_distributed_guess_backs_off_unknown_addresses_twice_as_long_each_time(signed_in_before, settings):
    settings.PAI_LOGIN_USER_MAX_FAILURES = 30
    for round_ in (1, 2):
        # Nine guesses from each of many addresses: under the per-address limit everywhere.
        for i in range(30):
            _login(f"203.0.{round_}.{i // 9}", "a_member", "guess")
        locked = _login(f"198.51.{round_}.1", "a_member", PASSWORD)
        assert locked.status_code == 429
        assert int(locked["Retry-After"]) == pytest.approx(900 * round_, abs=5)
        # The victim's own address is never locked by failures elsewhere.
        assert _login(HOME, "a_member", PASSWORD).status_code == 200
        # The lockout ends (as if its time had passed); the next one lasts twice as long.
        LoginThrottle.objects.update(locked_until=timezone.now())


def test_a_spraying_address_is_locked_for_new_users_not_for_its_own(signed_in_before, settings):
    settings.PAI_LOGIN_ADDRESS_MAX_FAILURES = 5
    for name in ("b_member", "b_admin", "a_admin", "nobody", "someone"):
        _login(HOME, name, "guess")

    assert _login(HOME, "b_member", PASSWORD).status_code == 429
    assert _login(HOME, "a_member", PASSWORD).status_code == 200


def test_the_counters_are_shared_not_in_one_process_memory(world):
    for _ in range(10):
        _login(ATTACKER, "a_member", "guess")
    cache.clear()  # what another web process, or a restarted one, sees of the local memory cache

    assert _login(ATTACKER, "a_member", PASSWORD).status_code == 429


def test_behind_a_proxy_the_client_it_saw_is_the_address(signed_in_before, settings):
    settings.PAI_TRUSTED_PROXY_COUNT = 1
    ingress = "10.0.0.2"
    for _ in range(10):
        # The attacker writes an X-Forwarded-For of its own: the ingress appends what it saw.
        _login(ingress, "a_member", "guess", HTTP_X_FORWARDED_FOR=f"{HOME}, {ATTACKER}")

    assert _login(ingress, "a_member", PASSWORD, HTTP_X_FORWARDED_FOR=ATTACKER).status_code == 429
    assert _login(ingress, "a_member", PASSWORD, HTTP_X_FORWARDED_FOR=ELSEWHERE).status_code == 200
