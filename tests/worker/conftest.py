import os
import signal
import subprocess
import time

import pytest
import yaml
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.jobs.worker.controller import Controller
from apps.jobs.worker.loop import run_cycle_unless_paused


def stop_qcluster(process, timeout=30):
    """Stop a `manage.py qcluster` started in a session of its own as a deployment does: SIGTERM
    to the cluster's main process, which stops its workers, monitor and pusher and exits (in
    about a second). SIGTERM sent to the whole process group instead reaches those children
    behind the main process's back, and the cluster then never exits (it waited the whole
    timeout, 20-30 s, for the SIGKILL). Whatever is left after `timeout` is killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # any child left behind
    except ProcessLookupError:
        pass
    process.wait()


@pytest.fixture(autouse=True)
def _isolated_worker(settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    cache.clear()


class Worker:
    """Drives the controller of the world's cluster cycle by cycle, as the leader would."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.controller = Controller(cluster)

    def cycle(self, now=None):
        run_cycle_unless_paused(self.controller, now)

    def run_until(self, predicate, timeout=30.0, tick=0.1):
        deadline = time.monotonic() + timeout
        while True:
            self.cycle()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError("the condition did not hold in time")
            time.sleep(tick)

    def wait_for_state(self, job, *states, timeout=30.0):
        self.run_until(lambda: Job.objects.get(pk=job.pk).state in states, timeout=timeout)
        return Job.objects.get(pk=job.pk)

    def close(self):
        self.controller.close()


@pytest.fixture
def worker(world):
    w = Worker(world.cluster)
    yield w
    # Stop whatever still runs, so no process outlives the test.
    for pod in w.controller.backend.list_pods():
        w.controller.backend.delete_pod(pod.name, grace_seconds=0)
    w.close()


def job_yaml(name, *, vc="team_a", roles=None, priority="test", retry=0, lazy=False, extras=None):
    """A job document in OpenPAI's protocol; `roles` maps a task role to its fields."""
    roles = roles or {"main": {"commands": ["echo hello"]}}
    document = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "jobRetryCount": retry,
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "ubuntu:22.04"}],
        "defaults": {"virtualCluster": vc},
        "taskRoles": {},
        "extras": {"hivedScheduler": {"jobPriorityClass": priority, "lazyPreemptionEnable": lazy}, **(extras or {})},
    }
    for role, fields in roles.items():
        document["taskRoles"][role] = {
            "instances": fields.get("instances", 1),
            "dockerImage": "image",
            "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": fields.get("gpu", 1)},
            "commands": fields["commands"],
            **({"completion": fields["completion"]} if "completion" in fields else {}),
        }
    return yaml.safe_dump(document, sort_keys=False)


@pytest.fixture
def submit():
    def submit_as(user, text):
        client = APIClient()
        client.force_authenticate(user)
        response = client.post("/api/v2/jobs", data=text, content_type="text/yaml")
        assert response.status_code == 202, response.content
        return Job.objects.get(owner=user, name=yaml.safe_load(text)["name"])

    return submit_as
