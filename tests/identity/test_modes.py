"""What each authentication mode offers: OpenPAI's routes of the other mode answer NoApiError."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from .conftest import oidc_settings

BASE_DIR = Path(__file__).resolve().parents[2]

BASIC_ONLY_ROUTES = [
    ("post", "/api/v2/authn/basic/login", {"username": "root", "password": "x"}),
    ("post", "/api/v2/users", {"username": "zed", "password": "a-long-passphrase", "email": "", "admin": False,
                               "virtualCluster": [], "extension": {}}),
    ("put", "/api/v2/users", {"data": {"username": "a_member", "email": "new@example.com"}, "patch": True}),
    ("put", "/api/v2/users/me", {"data": {"username": "root", "email": "root@new.example"}, "patch": True}),
    ("delete", "/api/v2/users/a_member", None),
    ("put", "/api/v2/users/a_member/group", {"groupname": "team_b"}),
    ("delete", "/api/v2/users/a_member/group", {"groupname": "team_a"}),
    ("put", "/api/v2/users/a_member/grouplist", {"grouplist": ["default"]}),
]


@pytest.mark.django_db
def test_info_says_basic_in_basic_mode(client):
    assert client.get("/api/v2/info").json()["authnMethod"] == "basic"


@pytest.mark.django_db
def test_info_says_oidc_in_oidc_mode(client, oidc_mode):
    assert client.get("/api/v2/info").json()["authnMethod"] == "OIDC"


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body"), BASIC_ONLY_ROUTES)
def test_basic_mode_account_routes_do_not_exist_in_oidc_mode(world, oidc_mode, method, path, body):
    api = APIClient()
    api.force_authenticate(world.root)

    response = getattr(api, method)(path, body, format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "NoApiError"
    world.a_member.refresh_from_db()
    assert world.a_member.email == "a_member@example.com"
    assert set(world.a_member.groups.values_list("name", flat=True)) == {"default", "team_a"}


@pytest.mark.django_db
def test_reading_accounts_still_works_in_oidc_mode(world, oidc_mode):
    api = APIClient()
    api.force_authenticate(world.a_member)

    assert api.get("/api/v2/users/me").json()["username"] == "a_member"
    assert api.get("/api/v2/users").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v2/authn/oidc/login", "/api/v2/authn/oidc/logout"])
def test_openpai_oidc_routes_do_not_exist_in_basic_mode(client, path):
    response = client.get(path)

    assert response.status_code == 404
    assert response.json()["code"] == "NoApiError"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/oidc/authenticate/", "/oidc/callback/?code=x&state=y", "/oidc/token/"])
def test_oidc_pages_do_not_exist_in_basic_mode(client, world, path):
    client.force_login(world.a_member)

    assert client.get(path).status_code == 404
    assert client.post("/oidc/logout/").status_code == 404


@pytest.mark.django_db
def test_the_admin_keeps_its_password_form_in_basic_mode(client):
    response = client.get("/admin/login/")

    assert response.status_code == 200
    assert 'name="password"' in response.content.decode()


def test_the_environment_switches_pai_into_oidc_mode(provider):
    """What the fixture `oidc_mode` sets by hand, pai/settings.py sets from the environment."""
    endpoints = oidc_settings(provider.url)
    env = {
        **os.environ,
        "PAI_AUTH_MODE": "oidc",
        "PAI_OIDC_GROUPS_CLAIM": "roles",
        **{name: value for name, value in endpoints.items() if name != "OIDC_RP_SIGN_ALGO"},
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    script = (
        "import json, os, django\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'pai.settings'\n"
        "django.setup()\n"
        "from django.conf import settings\n"
        "from django.contrib.auth import get_backends\n"
        "from django.test import Client\n"
        "from django.test.utils import setup_test_environment\n"
        "setup_test_environment()\n"
        "print(json.dumps({\n"
        "    'backends': [type(b).__name__ for b in get_backends()],\n"
        "    'settings': {n: getattr(settings, n) for n in %r},\n"
        "    'groups_claim': settings.PAI_OIDC_GROUPS_CLAIM,\n"
        "    'apps': settings.INSTALLED_APPS,\n"
        "    'info': Client().get('/api/v2/info').json(),\n"
        "}))\n"
    ) % (sorted(endpoints),)

    result = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["backends"][0] == "PaiOIDCBackend"
    assert seen["settings"] == endpoints
    assert seen["groups_claim"] == "roles"
    assert "mozilla_django_oidc" in seen["apps"]
    assert seen["info"]["authnMethod"] == "OIDC"
