"""Database connections of a live server on PostgreSQL: dropped ones are noticed before a request
uses them (no 5xx), and runserver's threads share a bounded pool instead of holding one
connection per client."""

import http.client
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import connection

from tests.conftest import requires_postgres

from . import live

pytestmark = [requires_postgres, pytest.mark.django_db]


def _admin_connection():
    settings = connection.settings_dict
    return psycopg.connect(host=settings["HOST"] or None, port=settings["PORT"] or None, user=settings["USER"],
                           password=settings["PASSWORD"] or None, dbname="postgres", autocommit=True)


def _database_name(url):
    return url.rsplit("/", 1)[1].split("?")[0]


def test_connections_terminated_under_gunicorn_cost_no_request_a_5xx(live_pai):
    server, auth = live_pai.server, {"Authorization": f"Bearer {live_pai.token}"}
    assert server.request("GET", "/api/v2/users/me", headers=auth)[0] == 200  # the worker keeps its connection
    with _admin_connection() as admin:
        terminated = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
            [_database_name(live_pai.database_url)],
        ).fetchone()[0]
    assert terminated >= 1

    statuses = [server.request("GET", "/api/v2/users/me", headers=auth)[0] for _ in range(5)]

    assert statuses == [200] * 5


@pytest.fixture
def runserver(live_pai):
    """`manage.py runserver` on the live database; its connections are named for pg_stat_activity."""
    # Eighty requests of one user within a second: the throttle (50/s) is not what is tested here.
    env = {**live_pai.env, "DATABASE_URL": f"{live_pai.database_url}?application_name=pai-runserver",
           "PAI_THROTTLE_API": "1000/second"}
    server = live.Server(env, live_pai.tmp / "runserver.log", kind="runserver")
    yield server
    server.stop()


def _runserver_connections(url):
    with _admin_connection() as admin:
        return admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'pai-runserver'",
            [_database_name(url)],
        ).fetchone()[0]


def test_runserver_holds_a_bounded_pool_not_a_connection_per_client(live_pai, runserver):
    auth = {"Authorization": f"Bearer {live_pai.token}"}
    # Thirty clients that keep their HTTP connections alive: thirty runserver threads.
    clients = []
    for _ in range(30):
        client = http.client.HTTPConnection("127.0.0.1", runserver.port, timeout=60)
        client.request("GET", "/api/v2/users/me", headers=auth)
        response = client.getresponse()
        response.read()
        assert response.status == 200
        clients.append(client)
    try:
        assert _runserver_connections(live_pai.database_url) <= 10

        # A burst of fifty at once: every one answered, never more than the pool's connections.
        peak, done = [0], threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], _runserver_connections(live_pai.database_url))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(50) as pool:
                statuses = list(pool.map(lambda _: runserver.request("GET", "/api/v2/users/me", headers=auth)[0],
                                         range(50)))
        finally:
            done.set()
            watcher.join()
        assert statuses == [200] * 50
        assert peak[0] <= 10
    finally:
        for client in clients:
            client.close()
