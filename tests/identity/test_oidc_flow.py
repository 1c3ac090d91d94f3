"""The OIDC redirect flow end to end, against a real provider: users, groups, refusal, logout, tokens."""

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import Client

from apps.accounts.models import Group
from apps.accounts.oidc import PaiOIDCBackend
from apps.accounts.roles import DEFAULT_GROUP
from apps.audit.models import AuditEntry
from apps.tenants.models import Membership

from .conftest import CLIENT_ID, local, new_subject, serve, with_query

User = get_user_model()


@pytest.fixture
def idp_groups(world):
    """Team A's and team B's groups mirror the provider's `idp-team-a` and `idp-team-b`."""
    for key in ("a", "b"):
        group = getattr(world, f"group_{key}")
        group.external_name = f"idp-team-{key}"
        group.save()
    return world


def group_names(user):
    return set(user.groups.values_list("name", flat=True))


@pytest.mark.django_db
def test_first_login_creates_the_user_from_the_claims(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="carol", email="carol@example.org", groups=["idp-team-a", "other"])

    response = browser.login(sub)

    assert response.status_code == 302
    assert response["Location"] == "/"
    carol = User.objects.get(username="carol")
    assert carol.email == "carol@example.org"
    assert not carol.has_usable_password()
    assert group_names(carol) == {DEFAULT_GROUP, "team_a"}
    assert Membership.objects.filter(user=carol, tenant=idp_groups.tenant_a, role=Membership.Role.MEMBER).exists()
    assert not Membership.objects.filter(user=carol, tenant=idp_groups.tenant_b).exists()
    me = browser.me()
    assert me.status_code == 200
    assert me.json()["username"] == "carol"
    assert "team_a" in me.json()["virtualCluster"]
    assert AuditEntry.objects.filter(action="user.oidc_create", object_id=str(carol.pk)).exists()


@pytest.mark.django_db
def test_username_and_email_come_from_the_configured_claims(browser, provider, idp_groups, settings):
    settings.PAI_OIDC_USERNAME_CLAIM = "upn"
    settings.PAI_OIDC_EMAIL_CLAIM = "mail"
    settings.PAI_OIDC_GROUPS_CLAIM = "roles"
    sub = new_subject()
    provider.set_user(sub, upn="dave.k", mail="dave@corp.example", preferred_username="ignored", roles="idp-team-b")

    assert browser.login(sub).status_code == 302

    dave = User.objects.get(username="dave.k")
    assert dave.email == "dave@corp.example"
    assert group_names(dave) == {DEFAULT_GROUP, "team_b"}
    assert not User.objects.filter(username="ignored").exists()


@pytest.mark.django_db
def test_groups_are_synced_at_every_login(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="erin", email="erin@example.org", groups=["idp-team-a"])
    assert make_browser().login(sub).status_code == 302
    erin = User.objects.get(username="erin")
    # A group without an external name, given by hand, is not the provider's to take away.
    hand_given = Group.objects.create(name="team_a_reviewers", tenant=idp_groups.tenant_a)
    erin.groups.add(hand_given)

    provider.set_user(sub, preferred_username="erin", email="erin@new.example.org", groups=["idp-team-b"])
    second = make_browser()
    assert second.login(sub).status_code == 302

    erin.refresh_from_db()
    assert erin.email == "erin@new.example.org"
    assert group_names(erin) == {DEFAULT_GROUP, "team_b", "team_a_reviewers"}
    # Still in one of team A's groups (the hand-given one): still a member of team A.
    assert set(Membership.objects.filter(user=erin).values_list("tenant__slug", flat=True)) == {"team-a", "team-b"}
    sync = AuditEntry.objects.filter(action="user.oidc_sync_groups", object_id=str(erin.pk)).latest("id")
    assert sync.changes == {"added": ["team_b"], "removed": ["team_a"]}
    assert second.me().json()["virtualCluster"] == ["team_b"]

    erin.groups.remove(hand_given)
    provider.set_user(sub, preferred_username="erin", email="erin@new.example.org", groups=["idp-team-a"])
    assert make_browser().login(sub).status_code == 302
    assert group_names(erin) == {DEFAULT_GROUP, "team_a"}
    # Team B's last group went: so did the plain membership of team B.
    assert set(Membership.objects.filter(user=erin).values_list("tenant__slug", flat=True)) == {"team-a"}


@pytest.mark.django_db
def test_the_default_group_stays_whatever_its_external_name(make_browser, provider, idp_groups):
    Group.objects.filter(name=DEFAULT_GROUP).update(external_name="idp-everyone")
    sub = new_subject()
    provider.set_user(sub, preferred_username="fay", email="fay@example.org", groups=["idp-everyone"])
    assert make_browser().login(sub).status_code == 403  # `default` alone is no group pai gives access by

    provider.set_user(sub, preferred_username="fay", email="fay@example.org", groups=["idp-team-b"])
    assert make_browser().login(sub).status_code == 302
    assert group_names(User.objects.get(username="fay")) == {DEFAULT_GROUP, "team_b"}


@pytest.mark.django_db
def test_sync_keeps_a_team_admins_role(make_browser, provider, idp_groups):
    """Team admins are made by hand: losing the team's group at the provider ends their groups, not their role."""
    sub = new_subject()
    provider.set_user(sub, preferred_username="a_admin", email="a_admin@example.com", groups=["idp-team-a"])
    assert make_browser().login(sub).status_code == 302
    provider.set_user(sub, preferred_username="a_admin", email="a_admin@example.com", groups=["idp-team-b"])
    assert make_browser().login(sub).status_code == 302

    a_admin = idp_groups.a_admin
    assert group_names(a_admin) == {DEFAULT_GROUP, "team_b"}
    assert Membership.objects.get(user=a_admin, tenant=idp_groups.tenant_a).role == Membership.Role.ADMIN


@pytest.mark.django_db
def test_a_user_in_no_known_group_is_refused(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="frank", email="frank@example.org", groups=["idp-sales", "idp-hr"])

    response = browser.login(sub)

    assert response.status_code == 403
    page = response.content.decode()
    assert "in no group that pai knows" in page
    assert "pai-access@example.com" in page
    # Which groups would have been accepted is not the refused user's business.
    for secret in ("idp-team-a", "idp-team-b", "team_a", "team_b"):
        assert secret not in page
    assert not User.objects.filter(username="frank").exists()
    assert browser.me().status_code == 401


@pytest.mark.django_db
def test_a_known_user_who_left_every_group_is_refused_and_loses_them(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="gina", email="gina@example.org", groups=["idp-team-a"])
    assert make_browser().login(sub).status_code == 302

    provider.set_user(sub, preferred_username="gina", email="gina@example.org", groups=[])
    browser = make_browser()
    assert browser.login(sub).status_code == 403

    gina = User.objects.get(username="gina")
    assert group_names(gina) == {DEFAULT_GROUP}
    assert not Membership.objects.filter(user=gina).exists()
    assert browser.me().status_code == 401


@pytest.mark.django_db
def test_redirect_targets_are_honoured_on_pais_origin_only(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="hana", email="hana@example.org", groups=["idp-team-a"])

    assert make_browser().login(sub, redirect_uri="/oncall/")["Location"] == "/oncall/"
    assert make_browser().login(sub, **{"from": "http://testserver/admin/"})["Location"] == "http://testserver/admin/"
    assert make_browser().login(sub, redirect_uri="https://evil.example/steal")["Location"] == "/"
    assert make_browser().login(sub, redirect_uri="//evil.example/steal")["Location"] == "/"
    assert make_browser().login(sub, path="/oidc/authenticate/", next="/oncall/")["Location"] == "/oncall/"


@pytest.mark.django_db
def test_the_authorization_request_carries_state_nonce_and_pkce(browser, provider):
    query = parse_qs(urlsplit(browser.start_login()).query)

    assert query["client_id"] == [CLIENT_ID]
    assert query["response_type"] == ["code"]
    assert query["redirect_uri"] == ["http://testserver/oidc/callback/"]
    assert set(query["scope"][0].split()) >= {"openid", "email", "profile"}
    assert len(query["state"][0]) >= 32 and len(query["nonce"][0]) >= 32
    assert query["code_challenge_method"] == ["S256"]


@pytest.mark.django_db
def test_a_callback_with_another_browsers_state_is_refused(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="ivan", email="ivan@example.org", groups=["idp-team-a"])
    victim, attacker = make_browser(), make_browser()
    victim.start_login()
    # The attacker's own authorization code and state, delivered to the victim's browser.
    callback = provider.authorize(attacker.start_login(), sub)

    response = victim.client.get(local(callback))

    assert response.status_code == 400
    assert "did not complete" in response.content.decode()
    assert victim.me().status_code == 401
    assert not User.objects.filter(username="ivan").exists()


@pytest.mark.django_db
def test_a_callback_without_a_login_in_progress_is_refused(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="jane", email="jane@example.org", groups=["idp-team-a"])
    callback = provider.authorize(make_browser().start_login(), sub)
    stranger = make_browser()

    response = stranger.client.get(local(callback))

    assert response.status_code == 403
    assert "did not complete" in response.content.decode()
    assert stranger.me().status_code == 401
    assert not User.objects.filter(username="jane").exists()


@pytest.mark.django_db
def test_an_id_token_with_another_nonce_is_refused(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="kim", email="kim@example.org", groups=["idp-team-a"])
    authorize_url = browser.start_login()
    # The provider is asked for a token bound to a nonce this browser's login did not make.
    callback = provider.authorize(with_query(authorize_url, nonce="replayed-nonce-from-elsewhere-0123456789"), sub)
    assert parse_qs(urlsplit(callback).query)["state"] == parse_qs(urlsplit(authorize_url).query)["state"]

    response = browser.client.get(local(callback))

    assert response.status_code == 400
    assert "did not complete" in response.content.decode()
    assert browser.me().status_code == 401
    assert not User.objects.filter(username="kim").exists()


@pytest.mark.django_db
def test_an_id_token_signed_with_an_unknown_key_is_refused(browser, provider, other_provider, oidc_mode, idp_groups):
    """pai verifies the signature with the keys its JWKS endpoint publishes, nothing else."""
    oidc_mode.OIDC_OP_JWKS_ENDPOINT = f"{other_provider.url}/jwks"
    sub = new_subject()
    provider.set_user(sub, preferred_username="lena", email="lena@example.org", groups=["idp-team-a"])

    response = browser.login(sub)

    assert response.status_code == 400
    assert "did not complete" in response.content.decode()
    assert browser.me().status_code == 401
    assert not User.objects.filter(username="lena").exists()


@pytest.fixture
def jwks_of_both_providers(provider, other_provider):
    """A JWKS endpoint publishing two keys, the provider's among them."""
    keys = [requests.get(f"{p.url}/jwks", timeout=5).json()["keys"][0] for p in (provider, other_provider)]
    body = json.dumps({"keys": keys}).encode()

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    server, thread = serve(app)
    yield f"http://127.0.0.1:{server.server_port}/jwks"
    server.shutdown()
    thread.join(5)
    server.server_close()


@pytest.mark.django_db
def test_an_id_token_naming_no_key_is_refused_when_several_are_published(
    browser, provider, oidc_mode, jwks_of_both_providers, idp_groups
):
    """The provider's tokens carry no `kid`: pai then accepts only a JWKS of one signing key."""
    oidc_mode.OIDC_OP_JWKS_ENDPOINT = jwks_of_both_providers
    sub = new_subject()
    provider.set_user(sub, preferred_username="lars", email="lars@example.org", groups=["idp-team-a"])

    response = browser.login(sub)

    assert response.status_code == 400
    assert "did not complete" in response.content.decode()
    assert browser.me().status_code == 401
    assert not User.objects.filter(username="lars").exists()


@pytest.mark.django_db
def test_a_code_the_provider_will_not_redeem_fails_the_login_cleanly(browser, provider, oidc_mode, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="mona", email="mona@example.org", groups=["idp-team-a"])
    authorize_url = browser.start_login()
    # The code was issued to pai-tests; pai now redeems it as another client.
    oidc_mode.OIDC_RP_CLIENT_ID = "another-app"

    response = browser.client.get(local(provider.authorize(authorize_url, sub)))

    assert response.status_code == 403
    assert "did not complete" in response.content.decode()
    assert browser.me().status_code == 401
    assert not User.objects.filter(username="mona").exists()


def test_an_id_token_issued_to_another_client_is_refused(provider, oidc_mode):
    """The provider's own token, validly signed, but for another client: pai's audience check refuses it."""
    sub = new_subject()
    provider.set_user(sub, preferred_username="nils", email="nils@example.org")
    redirect_uri = "http://127.0.0.1/elsewhere"
    authorize_url = f"{provider.url}/oauth2/authorize?" + urlencode({
        "response_type": "code", "client_id": "another-app", "redirect_uri": redirect_uri,
        "scope": "openid", "state": "s" * 16, "nonce": "n" * 16,
    })
    code = parse_qs(urlsplit(provider.authorize(authorize_url, sub)).query)["code"][0]
    tokens = requests.post(f"{provider.url}/oauth2/token", data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "client_id": "another-app", "client_secret": "whatever",
    }, timeout=5).json()
    backend = PaiOIDCBackend()

    oidc_mode.OIDC_RP_CLIENT_ID = "another-app"
    assert PaiOIDCBackend().verify_token(tokens["id_token"], nonce="n" * 16)["sub"] == sub
    with pytest.raises(SuspiciousOperation, match="not issued to pai"):
        backend.verify_token(tokens["id_token"], nonce="n" * 16)


@pytest.mark.django_db
def test_a_denied_authorization_shows_the_failure_page(browser, provider, idp_groups):
    callback = provider.deny(browser.start_login())

    response = browser.client.get(local(callback))

    assert response.status_code == 403
    assert "did not complete" in response.content.decode()
    assert browser.me().status_code == 401


@pytest.mark.django_db
def test_an_invalid_username_claim_is_refused(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="no spaces allowed", email="x@example.org", groups=["idp-team-a"])

    assert browser.login(sub).status_code == 403
    assert not User.objects.filter(username="no spaces allowed").exists()


@pytest.mark.django_db
def test_api_logout_ends_the_session_and_the_providers(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="nina", email="nina@example.org", groups=["idp-team-a"])
    browser.login(sub)
    assert browser.me().status_code == 200

    response = browser.client.get("/api/v2/authn/oidc/logout", {"redirect_uri": "/oncall/"})

    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{provider.url}/oauth2/end_session"
    query = parse_qs(location.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/oncall/"]
    assert query["client_id"] == [CLIENT_ID]
    assert query["id_token_hint"][0].count(".") == 2
    assert browser.me().status_code == 401
    assert requests.get(response["Location"], timeout=5).status_code == 200

    foreign = browser.client.get("/api/v2/authn/oidc/logout", {"redirect_uri": "https://evil.example/"})
    assert parse_qs(urlsplit(foreign["Location"]).query)["post_logout_redirect_uri"] == ["http://testserver/"]


@pytest.mark.django_db
def test_page_logout_is_a_post(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="omar", email="omar@example.org", groups=["idp-team-a"])
    browser.login(sub)

    assert browser.client.get("/oidc/logout/").status_code == 405
    assert browser.me().status_code == 200
    response = browser.client.post("/oidc/logout/")

    assert response.status_code == 302
    assert response["Location"].startswith(f"{provider.url}/oauth2/end_session?")
    assert browser.me().status_code == 401


@pytest.mark.django_db
def test_a_token_obtained_after_login_authenticates_the_api(make_browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="paula", email="paula@example.org", groups=["idp-team-b"])
    browser = make_browser(enforce_csrf_checks=True)
    browser.login(sub)

    page = browser.client.get("/oidc/token/")
    assert page.status_code == 200
    assert "no-store" in page["Cache-Control"]
    csrf = browser.client.cookies["csrftoken"].value
    assert browser.client.post("/oidc/token/").status_code == 403  # no CSRF token: refused
    issued = browser.client.post("/oidc/token/", HTTP_X_CSRFTOKEN=csrf)
    assert issued.status_code == 200
    assert "no-store" in issued["Cache-Control"]
    token = issued.context["token"]
    assert token and token in issued.content.decode()

    api = Client()
    me = api.get("/api/v2/users/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert me.status_code == 200
    assert me.json()["username"] == "paula"
    assert me.json()["virtualCluster"] == ["team_b"]
    assert api.get("/api/v2/users/me", HTTP_AUTHORIZATION=f"Bearer {token}x").status_code == 401


@pytest.mark.django_db
def test_the_token_page_sends_anonymous_visitors_to_login(browser):
    response = browser.client.get("/oidc/token/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/oidc/token/")
    again = browser.client.get(response["Location"])
    assert again["Location"] == "/oidc/authenticate/?next=%2Foidc%2Ftoken%2F"


@pytest.mark.django_db
def test_the_admin_signs_in_through_the_provider(make_browser, provider, idp_groups):
    browser = make_browser()
    response = browser.client.get("/admin/")
    assert response.status_code == 302
    login = browser.client.get(response["Location"])
    assert login.status_code == 302
    assert login["Location"] == "/oidc/authenticate/?next=%2Fadmin%2F"

    sub = new_subject()
    provider.set_user(sub, preferred_username="a_admin", email="a_admin@example.com", groups=["idp-team-a"])
    callback = browser.login(sub, path=login["Location"])
    assert callback["Location"] == "/admin/"
    assert browser.client.get("/admin/").status_code == 200
    assert browser.client.get("/admin/login/", {"next": "/admin/tenants/"})["Location"] == "/admin/tenants/"

    logout = browser.client.post("/admin/logout/")
    assert logout.status_code == 302
    assert logout["Location"].startswith(f"{provider.url}/oauth2/end_session?")
    assert browser.client.get("/admin/").status_code == 302


@pytest.mark.django_db
def test_the_admin_refuses_a_signed_in_member(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="quinn", email="quinn@example.org", groups=["idp-team-a"])
    browser.login(sub)

    response = browser.client.get("/admin/login/")

    assert response.status_code == 403
    assert "administers neither pai nor a team" in response.content.decode()
    assert 'action="/oidc/logout/"' in response.content.decode()



@pytest.mark.django_db
def test_a_username_claim_that_differs_from_an_account_only_in_case_is_refused(browser, provider, idp_groups):
    sub = new_subject()
    provider.set_user(sub, preferred_username="A_Member", email="x@example.org", groups=["idp-team-a"])

    response = browser.login(sub)

    assert response.status_code == 403
    assert "differs from\nyours only in letter case" in response.content.decode()
    assert browser.me().status_code == 401
    assert list(User.objects.filter(username__iexact="a_member").values_list("username", flat=True)) == ["a_member"]
