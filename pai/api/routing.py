"""URL helpers for the OpenPAI-compatible routes, and the schema hook that goes with them."""

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
