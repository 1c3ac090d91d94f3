"""A real OpenID provider on 127.0.0.1 and pai switched into OIDC mode against it.

The provider is oidc-provider-mock (authlib underneath): it signs ID tokens with RS256,
publishes its key at /jwks, and lets a test choose who signs in by a form POST to its
authorization endpoint, with the claims set beforehand by `PUT /users/<sub>`.

pai's side runs in Django's test client (real middleware, sessions and CSRF); the
browser's visit to the provider is a `requests` call; pai's own calls to the provider
(token, JWKS, userinfo) are mozilla-django-oidc's real HTTP requests.
"""

import threading
import uuid
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import oidc_provider_mock
import pytest
import requests
from werkzeug.serving import make_server

CLIENT_ID = "pai-tests"


class Provider:
    def __init__(self, url):
        self.url = url

    def set_user(self, sub, **claims):
        response = requests.put(f"{self.url}/users/{sub}", json=claims, timeout=5)
        assert response.status_code == 204, response.text

    def authorize(self, authorize_url, sub):
        """What the browser does at the provider: sign in as `sub`; returns pai's callback URL."""
        assert authorize_url.startswith(f"{self.url}/oauth2/authorize?"), authorize_url
        response = requests.post(authorize_url, data={"sub": sub}, allow_redirects=False, timeout=5)
        assert response.status_code == 302, response.text
        return response.headers["Location"]

    def deny(self, authorize_url):
        response = requests.post(authorize_url, data={"action": "deny"}, allow_redirects=False, timeout=5)
        assert response.status_code == 302, response.text
        return response.headers["Location"]


def serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="session")
def provider():
    server, thread = serve(oidc_provider_mock.app(require_nonce=True))
    yield Provider(f"http://127.0.0.1:{server.server_port}")
    server.shutdown()
    thread.join(5)
    server.server_close()


@pytest.fixture(scope="session")
def other_provider():
    """A second provider with a key of its own: tokens it signs must not pass as the first's."""
    server, thread = serve(oidc_provider_mock.app())
    yield Provider(f"http://127.0.0.1:{server.server_port}")
    server.shutdown()
    thread.join(5)
    server.server_close()


def oidc_settings(url):
    return {
        "OIDC_RP_CLIENT_ID": CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": "pai-tests-secret",
        "OIDC_RP_SIGN_ALGO": "RS256",
        "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{url}/oauth2/authorize",
        "OIDC_OP_TOKEN_ENDPOINT": f"{url}/oauth2/token",
        "OIDC_OP_USER_ENDPOINT": f"{url}/userinfo",
        "OIDC_OP_JWKS_ENDPOINT": f"{url}/jwks",
        "OIDC_OP_LOGOUT_ENDPOINT": f"{url}/oauth2/end_session",
    }


@pytest.fixture
def oidc_mode(settings, provider):
    """pai as `PAI_AUTH_MODE=oidc` makes it (see the OIDC block of pai/settings.py), against `provider`.

    Every setting that mode reads at request time is switched; the routes of both modes
    are always installed and check the mode themselves, so the URLconf stays as it is.
    tests/identity/test_modes.py checks that the environment variables
    produce the same settings.
    """
    settings.PAI_AUTH_MODE = "oidc"
    settings.AUTHENTICATION_BACKENDS = ["apps.accounts.oidc.PaiOIDCBackend", *settings.AUTHENTICATION_BACKENDS]
    for name, value in oidc_settings(provider.url).items():
        setattr(settings, name, value)
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.OIDC_OP_LOGOUT_URL_METHOD = "apps.accounts.oidc.provider_logout_url"
    settings.OIDC_STORE_ID_TOKEN = True
    settings.OIDC_USE_PKCE = True
    settings.OIDC_TIMEOUT = 5
    settings.PAI_OIDC_ACCESS_CONTACT = "pai-access@example.com"
    return settings


def new_subject():
    return f"sub-{uuid.uuid4().hex[:12]}"


def with_query(url, **changes):
    """`url` with some query parameters replaced."""
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


def local(url):
    """A pai URL as the test client requests it: path and query."""
    parts = urlsplit(url)
    assert parts.netloc in ("", "testserver"), url
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


class Browser:
    """One browser: a Django test client for pai, plain HTTP for the provider."""

    def __init__(self, client, provider):
        self.client = client
        self.provider = provider

    def start_login(self, path="/api/v2/authn/oidc/login", **params):
        response = self.client.get(path, params)
        assert response.status_code == 302, response.content
        return response["Location"]

    def login(self, sub, path="/api/v2/authn/oidc/login", **params):
        """The whole flow; returns pai's answer to the callback."""
        callback = self.provider.authorize(self.start_login(path, **params), sub)
        return self.client.get(local(callback))

    def me(self):
        return self.client.get("/api/v2/users/me")


@pytest.fixture
def browser(client, provider, oidc_mode):
    return Browser(client, provider)


@pytest.fixture
def make_browser(provider, oidc_mode):
    from django.test import Client

    return lambda **kwargs: Browser(Client(**kwargs), provider)
