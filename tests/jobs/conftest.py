import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _fresh_throttles():
    # Throttle counters live in the cache; each test starts with none.
    cache.clear()
    yield
    cache.clear()
