"""Every URL pattern pai serves, and concrete URLs for them filled with Team A's objects."""

import re

from django.urls import URLPattern, URLResolver, get_resolver

METHODS = ("get", "post", "put", "patch", "delete")
_PARAM = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def _unanchored(route):
    route = re.sub(r"(^|/)\^", r"\1", route)
    for tail in ("/?$", "$"):
        if route.endswith(tail):
            route = route[: -len(tail)]
    return route


def route_key(route):
    """One key for a route and its trailing-slash twin, with the regex anchors dropped."""
    key = _PARAM.sub(lambda m: "{%s}" % (m.group(1) or m.group(2)), _unanchored(route))
    return key[:-1] if key.endswith("/") else key


def view_methods(pattern):
    """The HTTP methods a view implements; plain function views are probed with GET and POST."""
    callback = pattern.callback
    actions = getattr(callback, "actions", None)
    if actions:
        return sorted(actions)
    view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view_class is None:
        return ["get", "post"]
    return [m for m in METHODS if hasattr(view_class, m)]


def all_routes(section):
    """(key, route, pattern) of every pattern in `section`: "api", "admin" or "html"."""
    found = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if route.startswith("admin/"):
            kind = "admin"
        elif route.startswith("api/"):
            kind = "api"
        else:
            kind = "html"
        if kind == section:
            found.append((route_key(route), route, pattern))
    return found


def fill(route, values):
    """The URL path of `route` with its parameters taken from `values` (by parameter name)."""
    def value(match):
        return str(values[match.group(1) or match.group(2)])

    return "/" + _PARAM.sub(value, _unanchored(route))


def params(route):
    return [a or b for a, b in _PARAM.findall(route)]
