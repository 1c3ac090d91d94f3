"""API tokens: hashed at rest, expiry enforced, revocation immediate."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import ApiToken
from tests.factories import PASSWORD

from .conftest import as_text, every_row_of_every_table, login

pytestmark = pytest.mark.django_db


def bearer(api, token):
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_tokens_are_stored_only_as_digests(world, api):
    token = login(api(), "a_member", PASSWORD).json()["token"]
    application = bearer(api, token).post("/api/v2/tokens/application").json()["token"]

    for table, column, value in every_row_of_every_table():
        assert token not in as_text(value), (table, column)
        assert application not in as_text(value), (table, column)
    assert ApiToken.objects.filter(user=world.a_member).count() == 2


def test_an_expired_token_is_refused(world, api):
    token = login(api(), "a_member", PASSWORD, expiration=3600).json()["token"]
    client = bearer(api, token)
    assert client.get("/api/v2/users/me").status_code == 200

    ApiToken.objects.filter(user=world.a_member).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = client.get("/api/v2/users/me")
    assert response.status_code == 401
    assert response.json()["code"] == "UnauthorizedUserError"


def test_a_revoked_token_is_refused_on_the_very_next_request(world, api):
    token = login(api(), "a_member", PASSWORD).json()["token"]
    application = bearer(api, token).post("/api/v2/tokens/application").json()["token"]
    app_client = bearer(api, application)
    assert app_client.get("/api/v2/users/me").status_code == 200

    assert bearer(api, token).delete(f"/api/v2/tokens/{application}").status_code == 200

    assert app_client.get("/api/v2/users/me").status_code == 401
    assert bearer(api, token).get("/api/v2/users/me").status_code == 200


def test_a_new_password_revokes_the_login_tokens(world, api):
    token = login(api(), "a_member", PASSWORD).json()["token"]
    client = bearer(api, token)

    response = client.put("/api/v2/users/me", {"data": {"username": "a_member", "oldPassword": PASSWORD,
                                                        "newPassword": "An0ther-long-passphrase"}, "patch": True},
                          format="json")

    assert response.status_code in (200, 201), response.json()
    assert client.get("/api/v2/users/me").status_code == 401
