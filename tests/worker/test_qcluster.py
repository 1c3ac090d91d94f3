"""The worker as deployed: `manage.py qcluster` with Redis as the broker runs the scheduler loop."""

import subprocess
import sys
import uuid

import pytest

from apps.jobs.models import Job
from apps.jobs.tasks import ensure_schedules
from tests.conftest import redis_url_for_tests, requires_postgres

from .conftest import job_yaml, stop_qcluster
from .test_crashes import ROOT, wait_for, worker_env

# Worker processes need a database other processes can reach: PostgreSQL.
pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture
def redis_url():
    import redis

    url = redis_url_for_tests()
    client = redis.Redis.from_url(url)
    client.ping()
    yield url
    client.flushdb()


def test_qcluster_with_a_redis_broker_runs_a_submitted_job(world, submit, tmp_path, redis_url):
    ensure_schedules()
    # A cluster name of its own, so that tasks never mix with another run's on the same Redis.
    env = worker_env(tmp_path, REDIS_URL=redis_url, Q_CLUSTER_NAME=f"pai-test-{uuid.uuid4().hex[:8]}")
    qcluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        job = submit(world.a_member, job_yaml("through-redis", roles={"main": {"commands": ["echo hi"]}}))
        # What the web process does after a submit, with the production settings.
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", "from apps.jobs.tasks import kick; kick()"],
            cwd=ROOT, env=env, check=True, capture_output=True, timeout=60,
        )
        assert wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", timeout=60)
    finally:
        # The scheduler loop runs as a task for up to 55 s (SCHEDULER_LOOP_SECONDS) and qcluster
        # waits for running tasks before it exits: it is killed after a moment (it was after 20 s).
        stop_qcluster(qcluster, timeout=3)
