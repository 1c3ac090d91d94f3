"""URL helpers for the OpenPAI-compatible routes, and the schema hooks that go with them."""

import re

from django.urls import path


def openpai_path(route, view, name):
    """A route matched with and without a trailing slash, as OpenPAI's REST server (express) matched them.

    OpenPAI's own description writes some paths with the slash (`/users/{user}/group/`),
    its clients mostly without; both must reach the same view.
    """
    return [path(route, view, name=name), path(f"{route}/", view)]


def drop_trailing_slash_twins(endpoints, **kwargs):
    """drf-spectacular preprocessing hook: describe each OpenPAI route once, without its slash twin."""
    paths = {endpoint[0] for endpoint in endpoints}
    return [e for e in endpoints if not (e[0].endswith("/") and e[0].rstrip("/") in paths)]


_CATCH_ALL = "/api/{path}"
_LEGACY_USER = re.compile(r"^/api/v2/user(/|$)")


def drop_catch_all(endpoints, **kwargs):
    """drf-spectacular preprocessing hook: the catch-all that answers unknown paths is no operation."""
    return [e for e in endpoints if e[0] != _CATCH_ALL]


def name_legacy_user_routes(result, **kwargs):
    """drf-spectacular postprocessing hook: OpenPAI's older singular account routes
    (`/api/v2/user/...`) share the plural routes' views; describe them as deprecated aliases
    with operation ids of their own."""
    for path, operations in result["paths"].items():
        if not _LEGACY_USER.match(path):
            continue
        words = [w.strip("{}") for w in path.removeprefix("/api/v2/").split("/") if w]
        for method, operation in operations.items():
            operation["operationId"] = "legacy" + method.title() + "".join(w[:1].upper() + w[1:] for w in words)
            operation["deprecated"] = True
            operation["description"] = (
                "OpenPAI's older singular account route, kept for its clients; the /api/v2/users routes do the "
                "same. " + operation.get("description", "")
            ).strip()
    return result
