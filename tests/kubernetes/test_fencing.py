"""Two worker processes against one Kubernetes cluster (the in-suite API test server): the
leader is paused in the middle of creating pods, past its lease; the standby takes over;
the old leader, resumed, writes nothing more. No pod is created twice, no GPU given twice.

Real worker processes (`manage.py run_scheduler`) share the test database: PostgreSQL.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from apps.jobs.models import Job, TaskAttempt
from apps.jobs.worker import lease
from tests.conftest import requires_postgres
from tests.worker.conftest import job_yaml, submit  # noqa: F401 (submit is a fixture)
from tests.worker.test_crashes import worker_env

ROOT = Path(__file__).resolve().parents[2]
PODS = r"/namespaces/pai-team-a/pods$"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


class WorkerProcess:
    """`manage.py run_scheduler` with its log in a file."""

    def __init__(self, tmp_path, holder, **env):
        self.holder = holder
        self.log = tmp_path / f"{holder}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "run_scheduler", "--tick", "0.1", "--holder", holder],
                cwd=ROOT, env=worker_env(tmp_path, **env), stdout=subprocess.DEVNULL, stderr=out,
            )
        self.agent = f"pid {self.process.pid})"  # how its requests name it (User-Agent)

    def said(self, text):
        return self.log.read_text(errors="replace").count(text)

    @property
    def paused(self):
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def writes(self, server):
        return sum(server.count_requests(method, agent=self.agent) for method in WRITES)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_leader_paused_past_its_lease_writes_nothing_more_and_nothing_is_created_twice(
    world, kube_cluster, kube_server, kubelet, submit, tmp_path
):
    # Both workers stop themselves (SIGSTOP) after creating their 12th pod of 16, one request at a time: only the
    # first leader gets there. Creating 12 pods takes 6 s, longer than the 5 s lease. (With a 3 s lease, a leader
    # starved of CPU for the 1.5 s between renewals on a loaded 2-core box lost it before its 12th pod.)
    env = {"PAI_SCHEDULER_LEASE_SECONDS": "5", "PAI_FAILPOINT": "after-pod-created", "PAI_KUBE_CONCURRENCY": "1",
           "PAI_FAILPOINT_ACTION": "stop", "PAI_FAILPOINT_AFTER": "12"}
    workers = [WorkerProcess(tmp_path, "worker-1", **env), WorkerProcess(tmp_path, "worker-2", **env)]
    try:
        assert wait_for(lambda: all(w.said("leading") + w.said("standing by") for w in workers)), [
            w.log.read_text() for w in workers
        ]
        leader, standby = sorted(workers, key=lambda w: w.holder != lease.current_holder())
        assert leader.said("leading") and standby.said("standing by")
        kube_server.inject_latency("POST", PODS, 0.5)
        jobs = [
            submit(world.a_member, job_yaml(f"fenced-{i}", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
            for i in range(8)
        ]
        assert wait_for(lambda: leader.paused), leader.log.read_text()
        assert "lost the scheduler lease" not in leader.log.read_text()
        # It renewed its lease while it created pods: the standby never took over meanwhile.
        assert kube_server.count_requests("POST", PODS, agent=leader.agent, status=201) == 12
        assert standby.writes(kube_server) == 0

        # Paused past its lease: the standby takes over and creates the other pods.
        assert wait_for(lambda: lease.current_holder() == standby.holder)
        assert wait_for(lambda: kube_server.count_requests("POST", PODS, status=201) == 16), standby.log.read_text()
        assert wait_for(lambda: not TaskAttempt.objects.filter(task__job_attempt__job__in=jobs, pod_uid="").exists())
        writes = leader.writes(kube_server)
        warned = leader.said("standing by")
        leader.process.send_signal(signal.SIGCONT)
        # Resumed in the middle of its cycle, it asks the database before its next write,
        # learns it was deposed and stands by, having written nothing more.
        assert wait_for(lambda: leader.said("standing by") > warned), leader.log.read_text()
        assert "lost the scheduler lease to worker-" in leader.log.read_text()
        assert leader.writes(kube_server) == writes

        # No GPU given twice: the live pods' devices are distinct on every node.
        devices = [
            (pod["spec"]["nodeName"], device)
            for pod in kubelet.pods()
            for device in json.loads(pod["metadata"]["annotations"]["pai.placement"])["devices"]
        ]
        assert len(devices) == 16 and len(set(devices)) == 16

        # The new leader runs every job to its end, the old one still writes nothing.
        def run_pods():
            kubelet.start_pending()
            for pod in kubelet.pods():
                if pod["status"]["phase"] == "Running":
                    kubelet.finish(pod, 0)
            return Job.objects.filter(pk__in=[job.pk for job in jobs], state="SUCCEEDED").count() == len(jobs)

        assert wait_for(run_pods), [Job.objects.get(pk=job.pk).state for job in jobs]
        assert leader.writes(kube_server) == writes
        assert leader.process.poll() is None and lease.current_holder() == standby.holder
    finally:
        for worker in workers:
            worker.stop()
        connection.close()
    # Every pod was created once; each job ran one attempt of two tasks.
    assert kube_server.count_requests("POST", PODS, status=201) == 16
    assert [Job.objects.get(pk=job.pk).attempts.count() for job in jobs] == [1] * 8
    assert TaskAttempt.objects.filter(task__job_attempt__job__in=jobs).count() == 16
