"""Brute-force protection of password logins, without locking the victims out.

Every failed `authenticate()` (API, sign-in page, admin) is counted in the database, so
that every web process shares the counters, in three scopes:

- a user name from one address: `PAI_LOGIN_MAX_FAILURES` failures within
  `PAI_LOGIN_LOCKOUT_SECONDS` lock that name out from that address for that long;
- a user name from anywhere: `PAI_LOGIN_USER_MAX_FAILURES` failures lock the name out,
  but only from addresses it never signed in from, for a lockout twice as long each time
  (a slower backoff, up to a day; forgotten after a day without failures);
- an address for any name (password spraying): `PAI_LOGIN_ADDRESS_MAX_FAILURES` failures
  lock the address out, but not for users who signed in from it before.

So an attacker guessing alice's password from elsewhere never keeps alice out of the
addresses she signs in from (kept for `PAI_LOGIN_KNOWN_ADDRESS_DAYS`), and every lockout
ends. Unknown user names are counted like real ones, so the answers tell nobody which
accounts exist. The address is REMOTE_ADDR, or behind `PAI_TRUSTED_PROXY_COUNT` proxies the
client they saw (`pai.security.client_address`).
"""

import hashlib
import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from pai.security import client_address

from .models import KnownLoginAddress, LoginThrottle

PAIR, USER, ADDRESS = "pair", "user", "address"
# The longest per-user lockout, however often it doubled.
MAX_USER_LOCKOUT = timedelta(days=1)


def _key(scope, *values):
    return hashlib.sha256("\x00".join((scope, *values)).encode()).hexdigest()


def _scopes(username, request):
    """{scope: key} that apply to a login of `username` from this request's address."""
    address = client_address(request)
    name = username.casefold() if username else ""
    scopes = {}
    if name and address:
        scopes[PAIR] = _key(PAIR, name, address)
    if name:
        scopes[USER] = _key(USER, name)
    if address:
        scopes[ADDRESS] = _key(ADDRESS, address)
    return scopes


def _known_address(username, request):
    address = client_address(request)
    if not (username and address):
        return False
    since = timezone.now() - timedelta(days=settings.PAI_LOGIN_KNOWN_ADDRESS_DAYS)
    User = get_user_model()
    return KnownLoginAddress.objects.filter(
        **{f"user__{User.USERNAME_FIELD}__iexact": username}, address=address, last_login_at__gte=since
    ).exists()


def retry_after(username, request):
    """Seconds until `username` may try again from this request's address; 0 when not locked out."""
    scopes = _scopes(username, request)
    now = timezone.now()
    locks = dict(
        LoginThrottle.objects.filter(key__in=scopes.values(), locked_until__gt=now).values_list("key", "locked_until")
    )
    if not locks:
        return 0
    applying = [scopes[PAIR]] if PAIR in scopes else []
    if not _known_address(username, request):
        applying += [scopes[s] for s in (USER, ADDRESS) if s in scopes]
    until = max((locks[key] for key in applying if key in locks), default=None)
    return max(0, math.ceil((until - now).total_seconds())) if until else 0


def _limits():
    lockout = timedelta(seconds=settings.PAI_LOGIN_LOCKOUT_SECONDS)
    return {
        PAIR: settings.PAI_LOGIN_MAX_FAILURES,
        USER: settings.PAI_LOGIN_USER_MAX_FAILURES,
        ADDRESS: settings.PAI_LOGIN_ADDRESS_MAX_FAILURES,
    }, lockout


def register_failure(username, request):
    limits, lockout = _limits()
    now = timezone.now()
    with transaction.atomic():
        for scope, key in _scopes(username, request).items():
            row = _locked_row(key, now + lockout)
            if row.window_ends <= now:
                row.failures, row.window_ends = 0, now + lockout
            row.failures += 1
            if row.failures >= limits[scope]:
                length = lockout
                if scope == USER:
                    length = min(lockout * 2**row.strikes, MAX_USER_LOCKOUT)
                row.locked_until, row.strikes, row.failures = now + length, row.strikes + 1, 0
                row.window_ends = row.locked_until
            row.save()
        # Rows of scopes nobody has tried for a day are of no use any more.
        LoginThrottle.objects.filter(window_ends__lt=now - timedelta(days=1)).filter(
            Q(locked_until__isnull=True) | Q(locked_until__lt=now)
        ).delete()


def _locked_row(key, window_ends):
    """The scope's row, locked for this transaction (created at its first failure)."""
    row = LoginThrottle.objects.select_for_update().filter(key=key).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return LoginThrottle.objects.create(key=key, window_ends=window_ends)
    except IntegrityError:  # another process counted this scope's first failure meanwhile
        return LoginThrottle.objects.select_for_update().get(key=key)


def register_success(user, request):
    """The address becomes known for the user, and their failures from it are forgotten
    (not their per-user count: the attacker elsewhere goes on)."""
    scopes = _scopes(user.get_username(), request)
    if PAIR in scopes:
        LoginThrottle.objects.filter(key=scopes[PAIR]).filter(
            Q(locked_until__isnull=True) | Q(locked_until__lte=timezone.now())
        ).delete()
    address = client_address(request)
    if address:
        KnownLoginAddress.objects.update_or_create(
            user=user, address=address, defaults={"last_login_at": timezone.now()}
        )


def message(seconds):
    minutes = max(1, math.ceil(seconds / 60))
    return (
        f"Too many failed sign-in attempts. Sign-in is locked for {minutes} minute{'s' if minutes != 1 else ''}; "
        "try again later."
    )
