"""User names are unique whatever their case: `Carol` cannot stand beside `carol`.

Every way an account is created (the API, the admin, onboarding one by one or by CSV, the
OIDC login) asks `is_taken` first and refuses with `TAKEN`, the same words wherever the
name is held and whoever holds it; a unique index on the lower-cased name
(migration `accounts.0005`) holds the rule in the database for both PostgreSQL and SQLite.

The database compares as it lowers: PostgreSQL lowers every letter, SQLite only A–Z (its
LOWER() and LIKE are ASCII-only), so on SQLite names that differ only in the case of a
non-ASCII letter are two names. Production runs PostgreSQL.
"""

from django.contrib.auth import get_user_model

# The refusal, after the name: it says the name cannot be had, not who holds it or where.
TAKEN = "is taken"


def holders(username):
    """The accounts whose name is `username` up to case."""
    return get_user_model().objects.filter(username__iexact=username)


def is_taken(username, *, exclude=None):
    """True when another account's name equals `username` up to case (`exclude`: a user, not counted)."""
    found = holders(username)
    if exclude is not None and exclude.pk is not None:
        found = found.exclude(pk=exclude.pk)
    return found.exists()


def taken_among(usernames):
    """The lower-cased names of `usernames` that an account holds up to case."""
    from django.db.models.functions import Lower

    wanted = {name.lower() for name in usernames if name}
    if not wanted:
        return set()
    User = get_user_model()
    found = User.objects.annotate(lowered=Lower("username")).filter(lowered__in=wanted).values_list("username", flat=True)
    return {name.lower() for name in found} & wanted
