import pytest

from apps.accounts import sharing
from tests.api.conftest import client_for, clients  # noqa: F401  (the API suite's token clients, reused)
from tests.jobs.factories import submitted_job


@pytest.fixture
def shared_world(world):
    """The world, plus shares across the teams: `b_member` may use Team A's VC and storage
    (shared with group `team_b`) and read a_member's job `shared_job` (shared by name);
    a_member's job `private_job` is shared with nobody."""
    sharing.share_with_group(world.a_admin, world.vc_a, world.group_b)
    sharing.share_with_group(world.a_admin, world.storage_a, world.group_b)
    world.shared_job = submitted_job(world.a_member, name="shared_job", vc="team_a")
    world.private_job = submitted_job(world.a_member, name="private_job", vc="team_a")
    world.b_job = submitted_job(world.b_member, name="b_job", vc="team_b")
    sharing.share_with_user(world.a_member, world.shared_job, world.b_member)
    return world


@pytest.fixture(scope="module")
def live_pai(django_db_setup, django_db_blocker, tmp_path_factory):
    """A gunicorn serving pai on a copy of the test database, with team `live` (its admin and a
    member with an application token); one per test module."""
    from types import SimpleNamespace

    from django.db import connection

    from . import live

    tmp = tmp_path_factory.mktemp("live-pai")
    with django_db_blocker.unblock():
        url, drop = live.copy_test_database(connection, tmp)
    try:
        env = live.environment(tmp, url)
        seeded = live.seed_database(env)
        server = live.Server(env, tmp / "server.log")
        try:
            yield SimpleNamespace(server=server, env=env, tmp=tmp, database_url=url, **seeded)
        finally:
            server.stop()
    finally:
        with django_db_blocker.unblock():
            drop()
