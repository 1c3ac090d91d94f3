"""Bounded cycles on a Kubernetes cluster: caps on placements and pod creations per cycle,
and a lease that a long cycle keeps renewing, confirmed by the database before every
batch of writes."""

import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from apps.jobs.models import Job, TaskAttempt, WorkerLease
from apps.jobs.worker import lease
from apps.jobs.worker.controller import Controller
from apps.jobs.worker.launch import job_key
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)

PODS = r"/namespaces/pai-team-a/pods$"


def two_pod_jobs(world, submit, count, prefix):
    return [
        submit(world.a_member, job_yaml(f"{prefix}-{i}", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
        for i in range(count)
    ]


def test_a_cycle_places_and_creates_at_most_its_caps_and_the_next_goes_on(
    world, kube_cluster, kubelet, kube_server, submit, settings
):
    settings.PAI_SCHEDULER_MAX_PLACEMENTS_PER_CYCLE = 3
    settings.PAI_SCHEDULER_MAX_POD_CREATIONS_PER_CYCLE = 4
    jobs = two_pod_jobs(world, submit, 4, "bounded")
    ids = [job.pk for job in jobs]
    worker = Worker(kube_cluster)
    try:
        worker.cycle()
        # Three jobs placed (the first three in the queue), the pods of two created: a gang's
        # pods are not split between cycles.
        assert list(Job.objects.filter(pk__in=ids, placement__isnull=False).order_by("pk").values_list("pk", flat=True)) == ids[:3]
        assert len(kubelet.pods()) == 4
        assert "placed within the next cycles" in Job.objects.get(pk=ids[3]).wait_reason
        assert {p["metadata"]["labels"]["pai.job"] for p in kubelet.pods()} == {job_key(job) for job in jobs[:2]}
        worker.cycle()
        assert Job.objects.filter(pk__in=ids, placement__isnull=False).count() == 4
        assert len(kubelet.pods()) == 8
        kubelet.start_pending()
        for pod in kubelet.pods():
            kubelet.finish(pod, 0)
        worker.run_until(lambda: Job.objects.filter(pk__in=ids, state="SUCCEEDED").count() == 4, tick=0.01)
    finally:
        worker.close()
    # Every pod was created once, and each job ran one attempt.
    assert kube_server.count_requests("POST", PODS, status=201) == 8
    assert [Job.objects.get(pk=pk).attempts.count() for pk in ids] == [1, 1, 1, 1]


def test_a_cycle_longer_than_the_lease_renews_it_and_asks_the_database_before_each_batch_of_writes(
    world, kube_cluster, kube_server, submit, settings
):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 1
    settings.PAI_SCHEDULER_LEASE_CHECK_WRITES = 4
    settings.PAI_KUBE_CONCURRENCY = 1  # one request at a time: the cycle outlasts the lease
    jobs = two_pod_jobs(world, submit, 6, "slow")
    # A busy API server: each pod creation takes 0.1 s, so creating 12 takes longer than the lease.
    kube_server.inject_latency("POST", PODS, 0.1)
    fence = lease.Fence("me")
    assert fence.hold()
    granted = WorkerLease.objects.get().expires_at
    controller = Controller(kube_cluster, fence=fence)
    try:
        confirmations, began = fence.confirmations, time.monotonic()
        controller.run_cycle()
        took = time.monotonic() - began
    finally:
        controller.close()
    assert took > 1.2
    assert kube_server.count_requests("POST", PODS, status=201) == 12
    assert TaskAttempt.objects.filter(task__job_attempt__job__in=jobs).exclude(pod_uid="").count() == 12
    # Still the holder, its lease renewed past the first grant by about the cycle's length.
    assert lease.current_holder() == "me"
    assert (WorkerLease.objects.get().expires_at - granted).total_seconds() > 0.5
    # The writes: 12 pods (and a namespace's quota and priority class made first), asked
    # about before each batch of 4, and at least every 0.5 s.
    assert fence.confirmations - confirmations >= 12 // 4


def test_a_leader_deposed_while_its_lease_seems_valid_stops_within_one_batch_of_writes(
    world, kube_cluster, kube_server, submit, settings
):
    """Its local deadline says the lease lasts a minute more, but another worker holds it
    (a clock or a database failover that the local deadline cannot see): the database is
    asked before the next batch of writes, and the cycle stops there."""
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    settings.PAI_SCHEDULER_LEASE_CHECK_WRITES = 4
    jobs = two_pod_jobs(world, submit, 6, "deposed")
    fence = lease.Fence("me")
    assert fence.hold()
    WorkerLease.objects.update(holder="another-worker", expires_at=Now() + timedelta(seconds=60))
    controller = Controller(kube_cluster, fence=fence)
    try:
        with pytest.raises(lease.LeaseLost, match="lost the scheduler lease to another-worker"):
            controller.run_cycle()
    finally:
        controller.close()
    writes = sum(kube_server.count_requests(method) for method in ("POST", "PUT", "PATCH", "DELETE"))
    assert 0 < writes <= 4
    assert kube_server.count_requests("POST", PODS, status=201) < 4
    # Nothing is lost: the jobs are placed and wait for the next leader to create their pods.
    assert Job.objects.filter(pk__in=[job.pk for job in jobs], state="WAITING", placement__isnull=False).count() == 6
