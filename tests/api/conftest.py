import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.accounts import services


@pytest.fixture(autouse=True)
def _fresh_throttle_counters():
    # Throttle counters live in the default cache; each test starts with none.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def anonymous():
    return APIClient()


@pytest.fixture
def client_for(db):
    """An API client presenting a fresh login token of `user` (a real token, through the real auth class)."""

    def make(user):
        _, token = services.issue_login_token(user)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        client.token = token
        return client

    return make


@pytest.fixture
def clients(world, client_for):
    """One authenticated client per user of the world, by username."""
    return {name: client_for(user) for name, user in world.users().items()}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Every world builds five accounts; PBKDF2's deliberate slowness is not under test here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
