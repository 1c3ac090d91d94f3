"""Django's Redis cache, with one Redis client object per connection pool.

Django's `RedisCacheClient.get_client` builds a new `redis.Redis` for every cache call;
with redis-py 5 and later that construction costs more CPU than the round trip itself,
and an API request makes several calls (rate limits, the submit path's topology
generation). The client object is reused instead; the connection pool, which it wraps,
is Django's own. Caches are per thread (`django.core.cache.caches`), and a pool notices
a fork, so sharing the object within a backend instance is safe.
"""

from django.core.cache.backends import redis as django_redis


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(django_redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
