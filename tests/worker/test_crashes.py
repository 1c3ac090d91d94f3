"""The worker killed (SIGKILL) at each step of a job's life, and two workers at once.

These run real worker processes (`manage.py run_scheduler`) against the test database,
so they need a database other processes can reach: PostgreSQL.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.jobs.models import Job, TaskAttempt
from apps.jobs.worker import lease
from tests.conftest import requires_postgres

from .conftest import job_yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def worker_env(tmp_path, **extra):
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return {
        **os.environ,
        "DATABASE_URL": url,
        "PAI_DATA_DIR": str(tmp_path),
        # The test process's key: a data directory of its own would make the worker another.
        "SECRET_KEY": settings.SECRET_KEY,
        "PAI_SCHEDULER_LEASE_SECONDS": "3",
        **extra,
    }


def start_worker(tmp_path, *args, **env):
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_scheduler", "--tick", "0.2", *args],
        cwd=ROOT,
        env=worker_env(tmp_path, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def job_state(job):
    return Job.objects.get(pk=job.pk).state


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pods_on_disk(tmp_path):
    pods = tmp_path / "clusters" / "local" / "pods"
    return sorted(p.name for p in pods.iterdir()) if pods.exists() else []


@pytest.mark.parametrize(
    "failpoint",
    ["after-placement-persisted", "after-pod-created", "after-deletion-pending", "during-completion"],
)
def test_a_worker_killed_at_any_step_is_repaired_by_the_next(world, submit, tmp_path, failpoint):
    job = submit(
        world.a_member,
        job_yaml("crashy", roles={"main": {"instances": 2, "gpu": 1, "commands": ["sleep 1", "echo done"]}}),
    )
    crashed = start_worker(tmp_path, PAI_FAILPOINT=failpoint)
    assert crashed.wait(60) == -signal.SIGKILL, crashed.stderr.read().decode()[-2000:]

    survivor = start_worker(tmp_path)
    try:
        assert wait_for(lambda: job_state(job) in ("SUCCEEDED", "FAILED", "STOPPED")), job_state(job)
    finally:
        stop(survivor)
    job = Job.objects.get(pk=job.pk)
    assert job.state == "SUCCEEDED", [a.exit_diagnostics for a in job.attempts.all()]
    assert job.attempts.count() == 1
    assert job.completed_at is not None
    task_attempts = list(TaskAttempt.objects.filter(task__job_attempt__job=job))
    assert len(task_attempts) == 2
    # One pod per task attempt ever existed: no task ran twice.
    assert pods_on_disk(tmp_path) == sorted(ta.pod_name for ta in task_attempts)
    for ta in task_attempts:
        log = (tmp_path / "clusters" / "local" / "pods" / ta.pod_name / "all.log").read_text()
        assert log.count("done") == 1


def test_two_workers_one_leads_and_the_other_takes_over_when_it_dies(world, submit, tmp_path):
    first = start_worker(tmp_path, "--holder", "worker-1")
    second = start_worker(tmp_path, "--holder", "worker-2")
    try:
        assert wait_for(lambda: lease.current_holder() in ("worker-1", "worker-2"), timeout=30)
        leader_name = lease.current_holder()
        leader, standby = (first, second) if leader_name == "worker-1" else (second, first)
        job = submit(world.a_member, job_yaml("before", roles={"main": {"commands": ["echo one"]}}))
        assert wait_for(lambda: job_state(job) == "SUCCEEDED", timeout=30)
        # The standby never took the lease while the leader lived.
        assert lease.current_holder() == leader_name

        leader.send_signal(signal.SIGKILL)
        leader.wait(10)
        assert wait_for(lambda: lease.current_holder() not in (None, leader_name), timeout=30)
        assert standby.poll() is None
        job = submit(world.a_member, job_yaml("after", roles={"main": {"commands": ["echo two"]}}))
        assert wait_for(lambda: job_state(job) == "SUCCEEDED", timeout=30)
    finally:
        stop(first)
        stop(second)
    connection.close()
