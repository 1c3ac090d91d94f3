"""The cache every production process shares (`REDIS_URL`): pai's Redis backend, which
reuses one Redis client object per connection pool, against a real Redis server."""

import time

import pytest
from django.core.cache import CacheHandler
from django.test import override_settings
from rest_framework.throttling import SimpleRateThrottle

from tests.conftest import redis_url_for_tests

from .openpai import assert_error


@pytest.fixture
def redis_cache():
    import redis

    url = redis_url_for_tests()
    server = redis.Redis.from_url(url)
    server.ping()
    server.flushdb()
    settings = {"default": {"BACKEND": "pai.cache.RedisCache", "LOCATION": url, "KEY_PREFIX": "pai-test"}}
    with override_settings(CACHES=settings):
        yield settings
    server.flushdb()


def _process(settings):
    """The default cache as another process would open it: its own handler, pool and client."""
    return CacheHandler(settings)["default"]


def test_values_written_by_one_process_are_read_by_another(redis_cache):
    one, other = _process(redis_cache), _process(redis_cache)
    one.set("limits", {"A100": 16}, 60)
    assert other.get("limits") == {"A100": 16}
    assert one.add("kick", 1, 10) and not other.add("kick", 1, 10)
    assert other.add("counter", 0, 10)
    assert other.incr("counter") == 1 and one.incr("counter") == 2
    assert one.get("counter") == 2
    other.delete("limits")
    assert one.get("limits") is None and one.get_many(["counter", "limits"]) == {"counter": 2}


def test_one_client_object_serves_every_call(redis_cache):
    cache = _process(redis_cache)
    cache.set("a", 1)
    client = cache._cache.get_client(write=True)
    cache.get("a")
    assert cache._cache.get_client(write=True) is client
    assert cache._cache.get_client(write=False) is client  # one server: reads and writes share the pool


def test_rate_limits_count_across_processes(world, client_for, redis_cache, monkeypatch):
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {**SimpleRateThrottle.THROTTLE_RATES, "user": "3/min"})
    member = client_for(world.a_member)
    for _ in range(3):
        assert member.get("/api/v2/users/me").status_code == 200
    response = member.get("/api/v2/virtual-clusters")
    assert_error(response, 429, "TooManyRequestsError")
    assert int(response["Retry-After"]) > 0
    # The counter lives in Redis: a fresh handler (another web process) sees the same history.
    history = [key for key in _process(redis_cache)._cache.get_client().keys("pai-test:*throttle_user*")]
    assert len(history) == 1


def test_a_members_submission_burst_is_shared_across_processes(world, client_for, redis_cache, settings):
    settings.PAI_THROTTLE_JOB_SUBMIT = "1/minute burst 2"
    member = client_for(world.a_member)
    # Refused documents count too (the throttle runs first): two, then the bucket is empty.
    answers = [member.post("/api/v2/jobs", "name: x\n", content_type="text/yaml").status_code for _ in range(3)]
    assert answers == [400, 400, 429]
    # The bucket is one value in Redis, which another web process reads the same way.
    other = _process(redis_cache)
    keys = other._cache.get_client().keys("pai-test:*throttle_job_submit*")
    assert len(keys) == 1
    due = other.get(keys[0].decode().split(":", 2)[2])  # past the prefix and the version
    assert isinstance(due, float) and due > time.time() + 59  # two of a 1-a-minute rate sent: full in 2 minutes
    assert member.post("/api/v2/jobs", "name: x\n", content_type="text/yaml").status_code == 429
