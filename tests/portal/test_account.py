"""My account through Django's test client: tokens as the API issues them (and refuses
them once revoked), the password and e-mail in basic mode only, the default VC."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import services, sharing
from apps.accounts.models import ApiToken
from apps.jobs.services import default_virtual_cluster
from tests.jobs.factories import submitted_job


@pytest.fixture
def member(world):
    client = Client()
    client.force_login(world.a_member)
    return client


def api_with(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def new_token(response):
    assert response.status_code == 200, response.content
    return re.search(r'id="new-token-value"[^>]*value="([^"]+)"', response.content.decode()).group(1)


def test_an_application_token_works_against_the_api_until_revoked(world, member):
    token = new_token(member.post("/account/tokens/", {"expires": "application"}))
    row = ApiToken.objects.get(user=world.a_member)
    assert row.application and row.expires_at is None
    assert api_with(token).get("/api/v2/jobs").status_code == 200
    # Listed by its identifier only: the token itself is shown once.
    listing = member.get("/account/").content.decode()
    assert row.prefix in listing and token not in listing
    # As the API's rule: an application token may not manage tokens.
    assert api_with(token).get("/api/v2/tokens").status_code == 403

    response = member.post(f"/account/tokens/{row.prefix}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/account/"
    assert api_with(token).get("/api/v2/jobs").status_code == 401
    assert not ApiToken.objects.filter(user=world.a_member).exists()


def test_an_expiring_token_lives_as_long_as_chosen_and_no_longer_than_the_api_allows(world, member, settings):
    token = new_token(member.post("/account/tokens/", {"expires": str(24 * 3600)}))
    row = ApiToken.objects.get(user=world.a_member)
    assert not row.application
    assert abs(row.expires_at - (timezone.now() + timedelta(days=1))) < timedelta(minutes=1)
    assert api_with(token).get("/api/v2/tokens").status_code == 200  # a login token manages tokens
    # Longer than PAI_LOGIN_TOKEN_MAX_SECONDS is not offered, and refused when sent.
    settings.PAI_LOGIN_TOKEN_MAX_SECONDS = 7 * 24 * 3600
    page = member.get("/account/").content.decode()
    assert "7 days" in page and "30 days" not in page
    refused = member.post("/account/tokens/", {"expires": str(30 * 24 * 3600)})
    assert refused.status_code == 400
    assert "Select a valid choice" in refused.content.decode()
    assert member.post("/account/tokens/", {}).status_code == 400
    assert ApiToken.objects.filter(user=world.a_member).count() == 1


def test_another_users_token_cannot_be_revoked_here(world, member):
    _, b_token = services.issue_application_token(world.b_member)
    row = ApiToken.objects.get(user=world.b_member)
    assert member.post(f"/account/tokens/{row.prefix}/revoke/").status_code == 404
    assert member.post(f"/account/tokens/{b_token}/revoke/").status_code == 404
    assert api_with(b_token).get("/api/v2/jobs").status_code == 200
    assert member.get("/account/tokens/x/revoke/").status_code == 405


def test_a_new_password_revokes_every_token_and_keeps_the_session(world, member):
    _, token = services.issue_application_token(world.a_member)
    wrong = member.post("/account/password/", {"old_password": "nope", "new_password": "A-much-better-one-42",
                                               "new_password_again": "A-much-better-one-42"})
    assert wrong.status_code == 400
    assert re.search(r'errorlist.*The old password is incorrect.*\s*<label for="id_old_password"',
                     wrong.content.decode(), re.S)
    differ = member.post("/account/password/", {"old_password": world.password, "new_password": "A-much-better-one-42",
                                                "new_password_again": "another"})
    assert differ.status_code == 400 and "The two new passwords differ." in differ.content.decode()
    weak = member.post("/account/password/", {"old_password": world.password, "new_password": "123",
                                              "new_password_again": "123"})
    assert weak.status_code == 400 and 'for="id_new_password"' in weak.content.decode()
    assert api_with(token).get("/api/v2/jobs").status_code == 200  # nothing changed yet

    done = member.post("/account/password/", {"old_password": world.password, "new_password": "A-much-better-one-42",
                                              "new_password_again": "A-much-better-one-42"})
    assert done.status_code == 302
    assert api_with(token).get("/api/v2/jobs").status_code == 401
    world.a_member.refresh_from_db()
    assert world.a_member.check_password("A-much-better-one-42")
    followed = member.get("/account/")  # still signed in, and told what happened
    assert followed.status_code == 200 and "Every token of yours is revoked" in followed.content.decode()


def test_email_change_and_oidc_mode(world, member, settings):
    assert member.post("/account/email/", {"email": "not an address"}).status_code == 400
    assert member.post("/account/email/", {"email": "carol@example.org"}).status_code == 302
    world.a_member.refresh_from_db()
    assert world.a_member.email == "carol@example.org"
    settings.PAI_AUTH_MODE = "oidc"
    assert member.post("/account/email/", {"email": "x@example.org"}).status_code == 404
    assert member.post("/account/password/", {}).status_code == 404
    page = member.get("/account/").content.decode()
    assert 'id="password-form"' not in page and 'id="email-form"' not in page and 'id="token-form"' in page


def test_the_default_vc_is_where_jobs_naming_none_go(world, member):
    assert default_virtual_cluster(world.a_member).name == "team_a"
    # A VC the user may not submit to is not offered, and refused.
    refused = member.post("/account/preferences/", {"default_virtual_cluster": "team_b"})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()
    # Team B shares its VC with Team A's group: now it may be the default.
    sharing.share_with_group(world.b_admin, world.vc_b, world.group_a)
    assert 'value="team_b"' in member.get("/account/").content.decode()
    assert member.post("/account/preferences/", {"default_virtual_cluster": "team_b"}).status_code == 302
    assert default_virtual_cluster(world.a_member).name == "team_b"
    assert submitted_job(world.a_member, name="goes_to_b").virtual_cluster.name == "team_b"
    assert 'id="default-vc">team_b<' in member.get("/account/").content.decode()
    # Once the share is gone, the preference no longer applies.
    sharing.unshare_with_group(world.b_admin, world.vc_b, world.group_a)
    assert default_virtual_cluster(world.a_member).name == "team_a"
    # Back to automatic.
    assert member.post("/account/preferences/", {"default_virtual_cluster": ""}).status_code == 302
    assert default_virtual_cluster(world.a_member).name == "team_a"


def test_account_pages_need_a_session(world):
    anonymous = Client()
    assert anonymous.get("/account/").status_code == 302
    assert anonymous.post("/account/tokens/", {"expires": "application"}).status_code == 302
    assert not ApiToken.objects.exists()
