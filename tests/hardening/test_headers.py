"""Security headers, the Content-Security-Policy of pages, CSRF on pages, no CORS."""

import re

import pytest
from django.test import Client

from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def csp(response):
    return dict(
        (part.split(" ", 1) + [""])[:2] for part in (p.strip() for p in response["Content-Security-Policy"].split(";"))
    )


@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/api/docs/", "/admin/login/"])
def test_pages_carry_the_security_headers_and_a_policy_allowing_only_pai_itself(db, path):
    response = Client().get(path)

    assert response.status_code == 200
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    policy = csp(response)
    assert policy["default-src"] == "'self'"
    assert re.fullmatch(r"'self' 'nonce-[\w-]+'", policy["script-src"])
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    # Every script of the page is pai's own file or carries this response's nonce.
    nonce = policy["script-src"].split("'nonce-")[1].rstrip("'")
    for tag in re.findall(r"<script\b[^>]*>", response.content.decode()):
        assert "src=" in tag or f'nonce="{nonce}"' in tag, tag


def test_the_swagger_uis_own_script_is_served_by_pai(db):
    page = Client().get("/api/docs/").content.decode()
    sources = re.findall(r'<script src="([^"]+)"', page)
    assert sources
    assert all(source.startswith(("/static/", "/api/docs/")) for source in sources), sources  # no CDN
    settings_script = Client().get("/api/docs/?script=")
    assert settings_script.status_code == 200
    assert "/api/schema/" in settings_script.content.decode()


def test_the_on_call_countdown_script_carries_the_nonce_of_its_response(world):
    browser = Client()
    browser.force_login(world.a_member)
    response = browser.get("/oncall/")

    assert response.status_code == 200
    nonce = csp(response)["script-src"].split("'nonce-")[1].rstrip("'")
    inline = re.findall(r"<script([^>]*)>(?!</script>)", response.content.decode())
    assert inline, "the incident list has its countdown script"
    assert all(f'nonce="{nonce}"' in attributes or "src=" in attributes for attributes in inline)
    # A fresh nonce for every response.
    assert csp(browser.get("/oncall/"))["script-src"] != csp(response)["script-src"]


def test_api_answers_carry_no_page_policy_but_the_other_headers(world):
    client = Client()
    client.force_login(world.a_member)
    response = client.get("/api/v2/users/me")

    assert response.status_code == 200
    assert "Content-Security-Policy" not in response
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["/api/v2/jobs", "/api/v2/authn/basic/login", "/api/v2/info", "/accounts/login/"])
def test_a_cross_origin_preflight_gets_no_cors_permission(db, path):
    response = Client().options(
        path,
        HTTP_ORIGIN="https://evil.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type",
    )

    assert not [header for header in response.headers if header.lower().startswith("access-control-")]


def test_a_cross_origin_request_gets_no_cors_headers(world):
    client = Client()
    client.force_login(world.a_member)
    response = client.get("/api/v2/users/me", HTTP_ORIGIN="https://evil.example")

    assert response.status_code == 200
    assert not [header for header in response.headers if header.lower().startswith("access-control-")]


def test_pages_refuse_a_post_without_the_csrf_token(world):
    browser = Client(enforce_csrf_checks=True)
    assert browser.post("/accounts/login/", {"username": "a_member", "password": PASSWORD}).status_code == 403

    page = browser.get("/accounts/login/")
    token = page.context["csrf_token"]
    response = browser.post("/accounts/login/", {"username": "a_member", "password": PASSWORD,
                                                 "csrfmiddlewaretoken": token})
    assert response.status_code == 302

    # A session does not carry a cross-site form post on the on-call pages either.
    assert browser.post("/oncall/incidents/new/", {"title": "x", "severity": 2}).status_code == 403


def test_the_api_refuses_a_session_authenticated_write_without_the_csrf_token(world):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.a_member)

    response = browser.post("/api/v2/jobs", "protocolVersion: 2", content_type="text/yaml")

    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
