"""Brute-force protection of password logins: failure counters and lockouts in the cache.

Every failed `authenticate()` (API, sign-in page, admin) counts against the user name and
against the client address; `PAI_LOGIN_MAX_FAILURES` failures within
`PAI_LOGIN_LOCKOUT_SECONDS` lock that name (or address) out for `PAI_LOGIN_LOCKOUT_SECONDS`.
A successful login clears the name's counter. The address is REMOTE_ADDR: pai does not
trust a client-supplied X-Forwarded-For, which an attacker could vary at will.
"""

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache


def _key(kind, scope, value):
    # Hashed: user names may hold characters a cache backend does not accept in keys.
    return f"pai:login:{kind}:{scope}:{hashlib.sha256(value.encode()).hexdigest()}"


def _scopes(username, request):
    scopes = []
    if username:
        scopes.append(("user", username.casefold()))
    address = request.META.get("REMOTE_ADDR") if request is not None else None
    if address:
        scopes.append(("ip", address))
    return scopes


def retry_after(username, request):
    """Seconds until `username` may try again from this request's address; 0 when not locked out."""
    now = time.time()
    locks = cache.get_many([_key("lock", scope, value) for scope, value in _scopes(username, request)])
    until = max(locks.values(), default=0)
    return max(0, math.ceil(until - now))


def register_failure(username, request):
    window = settings.PAI_LOGIN_LOCKOUT_SECONDS
    for scope, value in _scopes(username, request):
        key = _key("failures", scope, value)
        cache.add(key, 0, window)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, window)
            count = 1
        if count >= settings.PAI_LOGIN_MAX_FAILURES:
            cache.set(_key("lock", scope, value), time.time() + window, window)
            cache.delete(key)


def register_success(username):
    if username:
        cache.delete(_key("failures", "user", username.casefold()))


def message(seconds):
    minutes = max(1, math.ceil(seconds / 60))
    return (
        f"Too many failed sign-in attempts. Sign-in is locked for {minutes} minute{'s' if minutes != 1 else ''}; "
        "try again later."
    )
