"""The OpenAPI schema: valid OpenAPI 3, describing every route under /api/v2/, and the docs page."""

import re

import pytest
import yaml
from django.contrib.admindocs.views import simplify_regex
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.validation import validate_schema

# The identity and directory operations (OpenPAI's operation ids).
OPERATIONS = {
    "basicLogin", "basicLogout", "getTokens", "deleteToken", "createApplicationToken", "getAllUser", "createUser",
    "updateUser", "getUser", "getUserSelf", "deleteUser", "updateUserSelf", "updateUserGroup", "deleteUserGroup",
    "updateUserGrouplist", "getAllGroup", "createGroup", "updateGroup", "getGroup", "deleteGroup", "getGroupMembers",
    "listVirtualClusters", "getVirtualCluster", "getStorages", "getStorage", "getK8sNodes", "getK8sPods",
    "getClusterInfo",
}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def api_paths(resolver=None, prefix=""):
    """Every URL pattern of the project as an OpenAPI path template (`/api/v2/users/{username}`)."""
    resolver = resolver or get_resolver()
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from api_paths(pattern, route)
        elif isinstance(pattern, URLPattern):
            path = simplify_regex(route)
            yield re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)


def test_schema_is_valid_openapi(schema):
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")


def _unnamed(path):
    # drf-spectacular calls a `pk` parameter `id`; compare the paths' shapes, not parameter names. OpenPAI's
    # routes also answer with a trailing slash; the schema describes them once, without it.
    return re.sub(r"{\w+}", "{}", path).rstrip("/")


def test_every_api_v2_route_is_in_the_schema(schema):
    routes = {p for p in api_paths() if p.startswith("/api/v2/")}
    assert {"/api/v2/users/{username}/grouplist", "/api/v2/users/{username}/grouplist/"} <= routes
    missing = sorted({_unnamed(p) for p in routes} - {_unnamed(p) for p in schema["paths"]})
    assert not missing, missing


def test_identity_and_directory_routes_have_examples_and_error_shapes(schema):
    seen = set()
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            native = path.startswith(("/api/v2/clusters/", "/api/v2/tenants/"))
            if operation.get("operationId") not in OPERATIONS and not native:
                continue
            seen.add(operation["operationId"])
            success = [c for c in operation["responses"] if c.startswith("2") and c != "204"]
            assert success or method == "delete", (method, path)
            for code in success:
                content = operation["responses"][code].get("content", {})
                assert any("examples" in c for c in content.values()), (method, path, code)
            if not native and path not in ("/api/v2/info", "/api/v2/authn/basic/login"):
                assert "401" in operation["responses"], (method, path)
    assert OPERATIONS <= seen


def test_login_documents_form_and_json_bodies(schema):
    content = schema["paths"]["/api/v2/authn/basic/login"]["post"]["requestBody"]["content"]
    assert {"application/x-www-form-urlencoded", "application/json"} <= set(content)


def test_bearer_scheme_is_declared(schema):
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


@pytest.mark.django_db
def test_docs_page_serves_swagger_ui_without_a_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page
    # Its settings come as a script of its own (the Content-Security-Policy refuses inline scripts).
    assert "/api/schema/" in client.get("/api/docs/?script=").content.decode()
    assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page
