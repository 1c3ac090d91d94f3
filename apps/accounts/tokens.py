"""Bearer tokens of the OpenPAI API, stored the way django-rest-knox stores them.

A token is a random secret shown once, when it is issued. The database keeps its
SHA-256 digest (enough for a 256-bit random secret: no salt or slow hash is needed, as
nothing guessable is hashed) and its first characters as `prefix`, which finds the row
and names the token in listings without revealing it.
"""

import hashlib
import hmac
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connections, router
from django.utils import timezone

from pai import rawsql

from .models import ApiToken
from .roles import ADMIN_GROUP, remember_platform_admin


def new_secret():
    return secrets.token_urlsafe(32)


def digest_of(token):
    return hashlib.sha256(token.encode()).hexdigest()


def prefix_of(token):
    return token[: ApiToken.PREFIX_LENGTH]


def find_live_token(token, now=None):
    """The live token row for a presented token string, or None (unknown, revoked or expired).

    The row comes with its user loaded, and whether that user is in the platform admin
    group cached on it (`roles.is_platform_admin`): every API request asks both, so they
    are one hand-written query (the ORM spent longer building and PostgreSQL planning its
    version than running it).
    """
    if not token or len(token) < ApiToken.PREFIX_LENGTH or len(token) > 256:
        return None
    digest = digest_of(token)
    for row in _live_tokens_with_prefix(prefix_of(token), now or timezone.now()):
        if hmac.compare_digest(row.digest, digest):
            return row
    return None


def _live_tokens_with_prefix(prefix, now):
    User = get_user_model()
    token_fields, user_fields = rawsql.concrete_attnames(ApiToken), rawsql.concrete_attnames(User)
    user_groups, groups = User.groups.through._meta.db_table, Group._meta.db_table
    sql = (
        f"SELECT {rawsql.columns(ApiToken, token_fields, 't')}, {rawsql.columns(User, user_fields, 'u')}, EXISTS ("
        f'SELECT 1 FROM "{user_groups}" ug JOIN "{groups}" g ON g.id = ug.group_id'
        f" WHERE ug.user_id = u.id AND g.name = %s)"
        f' FROM "{ApiToken._meta.db_table}" t JOIN "{User._meta.db_table}" u ON u.id = t.user_id'
        f" WHERE t.prefix = %s AND (t.expires_at IS NULL OR t.expires_at > %s)"
    )
    db = router.db_for_read(ApiToken)
    with connections[db].cursor() as cursor:
        cursor.execute(sql, [ADMIN_GROUP, prefix, rawsql.db_datetime(db, now)])
        rows = cursor.fetchall()
    split = len(token_fields)
    for values in rows:
        row = rawsql.instance(ApiToken, db, token_fields, values[:split])
        row.user = rawsql.instance(User, db, user_fields, values[split:-1])
        remember_platform_admin(row.user, values[-1])
        yield row
