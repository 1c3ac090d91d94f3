from datetime import date, time

import pytest

from apps.oncall.models import Rotation, RotationMember
from tests import factories as f


@pytest.fixture
def oncall(world):
    """The world plus the platform team's rotation: alice and bob take one-week shifts, alice first.

    The first shift started on Monday 2026-01-05 10:00 UTC, so at any instant the one
    on call is computable; `oncall.dri_at(t)` says who.
    """
    alice = f.UserFactory(username="alice", email="alice@example.com")
    bob = f.UserFactory(username="bob", email="bob@example.com")
    rotation = Rotation.objects.create(
        name="platform", timezone="UTC", start_date=date(2026, 1, 5), handoff_weekday=0,
        handoff_time=time(10, 0), shift_days=7, dris_per_shift=1,
    )
    RotationMember.objects.create(rotation=rotation, user=alice, position=0)
    RotationMember.objects.create(rotation=rotation, user=bob, position=1)
    world.alice, world.bob, world.rotation = alice, bob, rotation
    return world


def login(client, user):
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # The world fixture hashes a password per user; the default PBKDF2 cost dominates
    # these tests' run time and proves nothing here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
