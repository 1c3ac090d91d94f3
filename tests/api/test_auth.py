"""Login, logout, tokens and /info: OpenPAI's authentication, with pai's hashed tokens."""

from datetime import timedelta
from unittest import mock

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.audit.models import AuditEntry

from .openpai import assert_error, assert_openpai

LOGIN = "/api/v2/authn/basic/login"


def bearer(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def login(world, username="a_member", fmt=None, **extra):
    data = {"username": username, "password": world.password, **extra}
    return APIClient().post(LOGIN, data, format=fmt)


@pytest.mark.parametrize("fmt", ["multipart", "json"])
def test_login_accepts_form_and_json_and_returns_a_working_token(world, fmt):
    response = login(world, fmt=fmt)
    assert response.status_code == 200
    body = response.json()
    assert_openpai("Login", body)
    assert body["user"] == "a_member" and body["admin"] is False
    me = bearer(body["token"]).get("/api/v2/users/me")
    assert me.status_code == 200 and me.json()["username"] == "a_member"


def test_login_form_urlencoded_as_openpai_documents_it(world):
    response = APIClient().post(
        LOGIN,
        f"username=root&password={world.password}&expiration=60",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 200
    assert response.json()["admin"] is True


def test_login_token_expires_after_the_requested_seconds_and_defaults_to_seven_days(world):
    before = timezone.now()
    login(world, expiration=3600)
    login(world, username="b_member")
    short = ApiToken.objects.get(user=world.a_member)
    default = ApiToken.objects.get(user=world.b_member)
    assert timedelta(seconds=3599) <= short.expires_at - before <= timedelta(seconds=3610)
    assert timedelta(days=7) - timedelta(seconds=1) <= default.expires_at - before <= timedelta(days=7, seconds=10)


@pytest.mark.parametrize("username,password", [("a_member", "wrong"), ("nobody", "whatever")])
def test_bad_credentials_answer_alike(world, username, password):
    response = APIClient().post(LOGIN, {"username": username, "password": password})
    assert_error(response, 400, "IncorrectPasswordError")
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("data,field", [
    ({"password": "x"}, "username"),
    ({"username": "a_member"}, "password"),
    ({"username": "a_member", "password": "x", "expiration": "soon"}, "expiration"),
    ({"username": "a_member", "password": "x", "expiration": 0}, "expiration"),
])
def test_login_validation_names_the_field(world, data, field):
    message = assert_error(APIClient().post(LOGIN, data, format="json"), 400, "InvalidParametersError")
    assert message.startswith(f"{field}:")


def test_login_with_an_enormous_expiration_gets_a_token_of_the_capped_lifetime_not_a_crash(world):
    response = login(world, fmt="json", expiration=10**12)
    assert response.status_code == 200
    row = ApiToken.objects.get(user__username="a_member")
    assert row.expires_at <= timezone.now() + timedelta(seconds=settings.PAI_LOGIN_TOKEN_MAX_SECONDS)


def test_an_inactive_user_cannot_log_in_nor_use_old_tokens(world):
    token = login(world).json()["token"]
    world.a_member.is_active = False
    world.a_member.save()
    assert login(world).status_code == 400
    assert_error(bearer(token).get("/api/v2/users/me"), 401, "UnauthorizedUserError")


def test_login_route_does_not_exist_in_oidc_mode(world, settings):
    settings.PAI_AUTH_MODE = "oidc"
    assert_error(login(world), 404, "NoApiError")


def test_expired_token_is_refused(world):
    token = login(world, expiration=60).json()["token"]
    assert bearer(token).get("/api/v2/users/me").status_code == 200
    later = timezone.now() + timedelta(seconds=61)
    with mock.patch("django.utils.timezone.now", return_value=later):
        response = bearer(token).get("/api/v2/users/me")
    assert_error(response, 401, "UnauthorizedUserError")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_logging_in_drops_your_expired_tokens(world):
    login(world, expiration=60)
    with mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=120)):
        login(world)
    assert ApiToken.objects.filter(user=world.a_member).count() == 1


def test_expired_tokens_are_not_listed(world, client_for):
    client = client_for(world.a_member)
    login(world, expiration=60)
    assert len(client.get("/api/v2/tokens").json()["tokens"]) == 2
    with mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=120)):
        assert len(client.get("/api/v2/tokens").json()["tokens"]) == 1


@pytest.mark.parametrize("header", ["Bearer", "Bearer not-a-token", "Bearer a b", "Bearer " + "x" * 300])
def test_malformed_or_unknown_bearer_tokens_are_401(world, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_error(client.get("/api/v2/users/me"), 401, "UnauthorizedUserError")


def test_anonymous_requests_are_401_with_a_bearer_challenge(anonymous, world):
    response = anonymous.get("/api/v2/users")
    assert_error(response, 401, "UnauthorizedUserError")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_logout_revokes_the_presented_token_at_once(world):
    token = login(world).json()["token"]
    other = login(world).json()["token"]
    client = bearer(token)
    response = client.delete("/api/v2/authn/basic/logout")
    assert response.status_code == 200 and response.json() == {"message": "Logout successfully"}
    assert_error(client.get("/api/v2/users/me"), 401, "UnauthorizedUserError")
    assert bearer(other).get("/api/v2/users/me").status_code == 200


def test_session_logout_ends_the_session(world):
    client = APIClient()
    client.force_login(world.a_member)
    assert client.get("/api/v2/users/me").status_code == 200
    assert client.delete("/api/v2/authn/basic/logout").status_code == 200
    assert client.get("/api/v2/users/me").status_code == 401


def test_tokens_are_stored_hashed_and_never_returned(world, client_for):
    token = login(world).json()["token"]
    row = ApiToken.objects.get(user=world.a_member)
    assert row.digest != token and token not in row.digest and len(row.digest) == 64
    assert row.prefix == token[: ApiToken.PREFIX_LENGTH]
    listing = bearer(token).get("/api/v2/tokens")
    assert listing.status_code == 200
    body = listing.json()
    assert_openpai("Tokens", body)
    assert body["tokens"] == [row.prefix]
    assert body["details"][0]["application"] is False
    text = listing.content.decode()
    assert token not in text and row.digest not in text
    for entry in AuditEntry.objects.all():
        assert token not in str(entry.changes) and row.digest not in str(entry.changes)


def test_tokens_list_only_your_own(world, client_for):
    mine = client_for(world.a_member)
    client_for(world.b_member)
    assert len(mine.get("/api/v2/tokens").json()["tokens"]) == 1


def test_delete_token_by_identifier_or_by_token(world, client_for):
    client = client_for(world.a_member)
    first = login(world).json()["token"]
    second = login(world).json()["token"]
    response = client.delete(f"/api/v2/tokens/{first[:ApiToken.PREFIX_LENGTH]}")
    assert response.status_code == 200 and response.json() == {"message": "revoke successfully"}
    assert bearer(first).get("/api/v2/users/me").status_code == 401
    assert client.delete(f"/api/v2/tokens/{second}").status_code == 200
    assert bearer(second).get("/api/v2/users/me").status_code == 401
    assert client.get("/api/v2/users/me").status_code == 200


def test_cannot_revoke_another_users_token(world, client_for):
    theirs = login(world, username="b_member").json()["token"]
    client = client_for(world.a_member)
    assert_error(client.delete(f"/api/v2/tokens/{theirs}"), 404, "NotFoundError")
    assert_error(client.delete(f"/api/v2/tokens/{theirs[:ApiToken.PREFIX_LENGTH]}"), 404, "NotFoundError")
    assert bearer(theirs).get("/api/v2/users/me").status_code == 200


def test_application_token_never_expires_and_is_revocable(world, client_for):
    client = client_for(world.a_member)
    response = client.post("/api/v2/tokens/application")
    assert response.status_code == 200
    body = response.json()
    assert_openpai("ApplicationToken", body)
    assert body["application"] is True
    row = ApiToken.objects.get(user=world.a_member, application=True)
    assert row.expires_at is None
    app = bearer(body["token"])
    with mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(days=3650)):
        assert app.get("/api/v2/users/me").status_code == 200
    assert client.delete(f"/api/v2/tokens/{row.prefix}").status_code == 200
    assert app.get("/api/v2/users/me").status_code == 401


def test_application_tokens_cannot_manage_tokens_or_accounts(world, client_for):
    token = client_for(world.root).post("/api/v2/tokens/application").json()["token"]
    app = bearer(token)
    assert app.get("/api/v2/users").status_code == 200
    message = assert_error(app.get("/api/v2/tokens"), 403, "ForbiddenUserError")
    assert "Applications" in message
    assert_error(app.post("/api/v2/tokens/application"), 403, "ForbiddenUserError")
    assert_error(app.delete(f"/api/v2/tokens/{token}"), 403, "ForbiddenUserError")
    assert_error(app.post("/api/v2/users", {"username": "x", "password": "pw-long-enough-1"}, format="json"),
                 403, "ForbiddenUserError")
    assert_error(app.post("/api/v2/groups", {"groupname": "g", "tenant": "team-a"}, format="json"),
                 403, "ForbiddenUserError")


def test_info_tells_the_auth_mode(anonymous, settings):
    response = anonymous.get("/api/v2/info")
    assert response.status_code == 200
    assert_openpai("Info", response.json())
    assert response.json()["authnMethod"] == "basic" and response.json()["launcherType"] == "k8s"
    settings.PAI_AUTH_MODE = "oidc"
    assert anonymous.get("/api/v2/info").json()["authnMethod"] == "OIDC"
