"""Tokens die with the trust they were issued under: every password change (the admin,
`/accounts/password_change/`, the API), a deactivation and a removal from the team revoke the
user's login and application tokens; a login token lives at most PAI_LOGIN_TOKEN_MAX_SECONDS."""

from datetime import timedelta

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import services
from apps.accounts.models import ApiToken
from apps.tenants.models import Membership
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "An0ther-long-passphrase"


class OneRoundPBKDF2(PBKDF2PasswordHasher):
    iterations = 1


def _bearer(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def tokens(world):
    """a_member's login token and application token, both working."""
    _, login = services.issue_login_token(world.a_member)
    _, application = services.issue_application_token(world.a_member)
    for token in (login, application):
        assert _bearer(token).get("/api/v2/users/me").status_code == 200
    return login, application


def _assert_revoked(tokens):
    for token in tokens:
        response = _bearer(token).get("/api/v2/users/me")
        assert response.status_code == 401, token
        assert response.json()["code"] == "UnauthorizedUserError"


def _admin(user):
    client = Client()
    client.force_login(user)
    return client


def test_a_password_set_in_the_admin_revokes_the_tokens(world, tokens):
    response = _admin(world.root).post(
        f"/admin/auth/user/{world.a_member.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )
    assert response.status_code == 302, response.content[:500]
    _assert_revoked(tokens)


def test_a_password_changed_on_the_accounts_page_revokes_the_tokens(world, tokens):
    response = _admin(world.a_member).post("/accounts/password_change/", {
        "old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD,
    })
    assert response.status_code == 302, response.content[:500]
    _assert_revoked(tokens)


def test_a_password_changed_through_the_api_revokes_the_application_tokens_too(world, tokens):
    login, application = tokens
    response = _bearer(login).put("/api/v2/users/me", {
        "data": {"username": "a_member", "oldPassword": PASSWORD, "newPassword": NEW_PASSWORD}, "patch": True,
    }, format="json")
    assert response.status_code == 201, response.content
    _assert_revoked(tokens)


def test_a_password_an_admin_sets_through_the_api_revokes_the_tokens(world, tokens, client_for):
    response = client_for(world.root).put("/api/v2/users", {
        "data": {"username": "a_member", "password": NEW_PASSWORD}, "patch": True,
    }, format="json")
    assert response.status_code == 201, response.content
    _assert_revoked(tokens)


def test_tokens_of_a_deactivated_user_stay_revoked_when_the_account_is_reactivated(world, tokens):
    world.a_member.is_active = False
    world.a_member.save()
    world.a_member.is_active = True
    world.a_member.save()
    _assert_revoked(tokens)


def test_removal_from_the_team_revokes_the_tokens(world, tokens):
    membership = Membership.objects.get(user=world.a_member, tenant=world.tenant_a)
    response = _admin(world.a_admin).post(f"/admin/tenants/membership/{membership.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content[:500]
    assert not Membership.objects.filter(pk=membership.pk).exists()
    _assert_revoked(tokens)


def test_a_password_hash_upgraded_at_login_keeps_the_tokens(world, tokens, settings):
    # A stronger hasher first: the MD5 hash of the test world is upgraded at the next login.
    settings.PASSWORD_HASHERS = [f"{__name__}.OneRoundPBKDF2", "django.contrib.auth.hashers.MD5PasswordHasher"]
    response = APIClient().post("/api/v2/authn/basic/login", {"username": "a_member", "password": PASSWORD},
                                format="json")
    assert response.status_code == 200
    world.a_member.refresh_from_db()
    assert world.a_member.password.startswith("pbkdf2_sha256$1$")
    for token in tokens:
        assert _bearer(token).get("/api/v2/users/me").status_code == 200


def test_a_login_token_lives_at_most_the_cap_whatever_it_asks(world):
    asked = 30 * 24 * 3600
    response = APIClient().post("/api/v2/authn/basic/login",
                                {"username": "a_member", "password": PASSWORD, "expiration": asked}, format="json")
    assert response.status_code == 200
    row = ApiToken.objects.get(user=world.a_member)
    assert row.expires_at <= timezone.now() + timedelta(days=7)
    assert row.expires_at >= timezone.now() + timedelta(days=7) - timedelta(minutes=1)


def test_the_schema_states_the_login_token_cap(world, client_for):
    schema = client_for(world.a_member).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "at most `PAI_LOGIN_TOKEN_MAX_SECONDS` (7 days" in schema
