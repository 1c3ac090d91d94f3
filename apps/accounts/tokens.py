"""Bearer tokens of the OpenPAI API, stored the way django-rest-knox stores them.

A token is a random secret shown once, when it is issued. The database keeps its
SHA-256 digest (enough for a 256-bit random secret: no salt or slow hash is needed, as
nothing guessable is hashed) and its first characters as `prefix`, which finds the row
and names the token in listings without revealing it.
"""

import hashlib
import hmac
import secrets

from .models import ApiToken


def new_secret():
    return secrets.token_urlsafe(32)


def digest_of(token):
    return hashlib.sha256(token.encode()).hexdigest()


def prefix_of(token):
    return token[: ApiToken.PREFIX_LENGTH]


def find_live_token(token, now=None):
    """The live token row for a presented token string, or None (unknown, revoked or expired)."""
    if not token or len(token) < ApiToken.PREFIX_LENGTH or len(token) > 256:
        return None
    digest = digest_of(token)
    candidates = ApiToken.objects.live(now).filter(prefix=prefix_of(token)).select_related("user")
    for row in candidates:
        if hmac.compare_digest(row.digest, digest):
            return row
    return None

