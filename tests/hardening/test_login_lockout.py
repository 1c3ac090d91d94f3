"""Brute-force protection of password logins: the API route, the sign-in page and the admin."""

import logging
import time

import pytest
from django.test import Client

from apps.accounts.models import ApiToken
from tests.factories import PASSWORD

from .conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _small_limits(settings):
    settings.PAI_LOGIN_MAX_FAILURES = 3
    settings.PAI_LOGIN_USER_MAX_FAILURES = 6
    settings.PAI_LOGIN_ADDRESS_MAX_FAILURES = 5
    settings.PAI_LOGIN_LOCKOUT_SECONDS = 600


def test_api_locks_a_user_name_out_from_the_attackers_address_with_429_and_retry_after(world, api):
    client = api(address="10.0.0.1")
    for _ in range(3):
        response = login(client, "a_member", "wrong")
        assert response.status_code == 400
        assert response.json()["code"] == "IncorrectPasswordError"

    # Even the right password is refused from there while locked out...
    response = login(client, "a_member", PASSWORD)

    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "TooManyRequestsError"
    assert "Too many failed sign-in attempts" in body["message"]
    assert 0 < int(response["Retry-After"]) <= 600
    assert not ApiToken.objects.filter(user=world.a_member).exists()
    # ...but not from another address, and other accounts are not affected.
    assert login(api(address="10.0.0.2"), "a_member", PASSWORD).status_code == 200
    assert login(api(address="10.0.0.1"), "b_member", PASSWORD).status_code == 200


def test_the_lockout_ends_after_the_lockout_period(world, api, settings):
    settings.PAI_LOGIN_LOCKOUT_SECONDS = 1
    client = api()
    for _ in range(3):
        login(client, "a_member", "wrong")
    assert login(client, "a_member", PASSWORD).status_code == 429

    time.sleep(1.1)
    assert login(client, "a_member", PASSWORD).status_code == 200


def test_a_successful_login_resets_the_counter_of_its_address(world, api):
    for _ in range(2):
        assert login(api(), "a_member", "wrong").status_code == 400
    assert login(api(), "a_member", PASSWORD).status_code == 200
    for _ in range(2):
        assert login(api(), "a_member", "wrong").status_code == 400

    assert login(api(), "a_member", PASSWORD).status_code == 200


def test_failures_from_one_address_lock_that_address_for_every_user_name(world, api):
    attacker = api(address="192.0.2.7")
    for name in ("a_member", "b_member", "nobody", "root", "b_admin"):
        assert login(attacker, name, "wrong").status_code == 400

    assert login(attacker, "a_admin", PASSWORD).status_code == 429
    assert login(api(address="192.0.2.8"), "a_admin", PASSWORD).status_code == 200


def test_unknown_user_names_are_counted_and_locked_like_real_ones(world, api):
    for name in ("no-such-user", "a_member"):
        for i in range(6):
            login(api(address=f"10.1.0.{i}"), name, "wrong")

        response = login(api(address="10.1.0.9"), name, "wrong")

        assert response.status_code == 429, name
        assert response.json() == {"code": "TooManyRequestsError", "message": response.json()["message"]}


def test_the_sign_in_page_lets_a_member_in_and_locks_out_like_the_api(world, api):
    browser = Client(REMOTE_ADDR="10.2.0.1")
    response = browser.get("/oncall/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/oncall/")

    page = browser.get("/accounts/login/?next=/oncall/")
    assert page.status_code == 200
    assert b'name="password"' in page.content

    response = browser.post("/accounts/login/?next=/oncall/", {"username": "a_member", "password": PASSWORD,
                                                             "next": "/oncall/"})
    assert response.status_code == 302
    assert response["Location"] == "/oncall/"
    assert browser.get("/oncall/").status_code == 200

    other = Client(REMOTE_ADDR="10.2.0.2")
    for _ in range(3):
        response = other.post("/accounts/login/", {"username": "b_member", "password": "wrong"})
        assert response.status_code == 200
        assert b"Please enter a correct username and password" in response.content
    response = other.post("/accounts/login/", {"username": "b_member", "password": PASSWORD})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert b"Too many failed sign-in attempts" in response.content
    assert "_auth_user_id" not in other.session
    # The API shares the same counters.
    assert login(api(address="10.2.0.2"), "b_member", PASSWORD).status_code == 429


def test_the_admin_login_is_refused_too_while_locked_out(world, api):
    for _ in range(3):
        login(api(address="10.3.0.1"), "root", "wrong")

    browser = Client(REMOTE_ADDR="10.3.0.1")
    response = browser.post("/admin/login/", {"username": "root", "password": PASSWORD, "next": "/admin/"})

    assert response.status_code == 200  # the form again, not a redirect into the admin
    assert "_auth_user_id" not in browser.session


def test_sign_out_asks_first_and_ends_the_session_on_post(world):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.a_member)
    page = browser.get("/oncall/")
    assert b'href="/accounts/logout/"' in page.content
    confirm = browser.get("/accounts/logout/")
    assert confirm.status_code == 200
    assert b'method="post"' in confirm.content
    assert browser.get("/oncall/").status_code == 200  # a GET signs nobody out
    assert browser.post("/accounts/logout/").status_code == 403  # no CSRF token

    response = browser.post("/accounts/logout/", {"csrfmiddlewaretoken": confirm.context["csrf_token"]})

    assert response.status_code == 200
    assert b"Signed out" in response.content
    assert browser.get("/oncall/").status_code == 302


def test_in_oidc_mode_the_sign_in_page_sends_people_to_the_provider(world, settings):
    settings.PAI_AUTH_MODE = "oidc"

    response = Client().get("/accounts/login/?next=/oncall/")

    assert response.status_code == 302
    assert response["Location"] == "/oidc/authenticate/?next=%2Foncall%2F"


def test_passwords_and_tokens_never_reach_the_logs(world, api, caplog):
    caplog.set_level(logging.DEBUG)
    client = api()
    login(client, "a_member", "a-wrong-Passw0rd-guess")
    token = login(client, "a_member", PASSWORD, expiration=3600).json()["token"]
    bearer = api()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert bearer.get("/api/v2/users/me").status_code == 200
    assert bearer.get("/api/v2/jobs/nobody~nothing").status_code == 404
    assert bearer.delete("/api/v2/authn/basic/logout").status_code == 200
    assert bearer.get("/api/v2/users/me").status_code == 401
    Client().post("/accounts/login/", {"username": "a_member", "password": "another-Wr0ng-one"})

    assert caplog.records, "the requests above log (at least the 4xx answers)"
    for secret in (token, PASSWORD, "a-wrong-Passw0rd-guess", "another-Wr0ng-one"):
        assert secret not in caplog.text
