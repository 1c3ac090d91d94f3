"""Faults of a Kubernetes cluster met by the worker, through the API test server over HTTP:
an API server down in the middle of a cycle, a 429 storm, a node that disappears and pods
deleted behind pai's back. Each leaves every job in a correct state, nothing run twice.

The outage and the storm are short (a second) but take the same path as the ~20 s of an
API server restart: the test settings shrink a call's retry budget to 0.3 s and the
circuit's pause to 0.2 s (tests/kubernetes/conftest.py).
"""

import pytest
from kubernetes import client
from rest_framework.test import APIClient

from apps.clusters.models import Cluster, Node
from apps.jobs.models import Job, TaskAttempt, TaskLog
from apps.jobs.worker.launch import job_key
from apps.jobs.worker.loop import run_scheduler
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)

PODS = r"/namespaces/pai-team-a/pods$"


def jobs_of(world, submit, count, prefix, instances=2):
    return [
        submit(world.a_member, job_yaml(f"{prefix}-{i}", roles={"main": {"instances": instances, "gpu": 1, "commands": ["true"]}}))
        for i in range(count)
    ]


def all_succeeded(jobs):
    return Job.objects.filter(pk__in=[job.pk for job in jobs], state="SUCCEEDED").count() == len(jobs)


def play_kubelet(kubelet):
    """A tick of the nodes: start new pods, end the running ones (exit 0), finish deletions."""
    kubelet.start_pending()
    for pod in kubelet.pods():
        if pod["status"]["phase"] == "Running" and not pod["metadata"].get("deletionTimestamp"):
            kubelet.finish(pod, 0)
    kubelet.server.finalize_deletions()


def assert_ran_once(jobs, kube_server, pods):
    """Each job succeeded in one attempt, every pod was created once."""
    assert [Job.objects.get(pk=job.pk).state for job in jobs] == ["SUCCEEDED"] * len(jobs)
    assert [Job.objects.get(pk=job.pk).attempts.count() for job in jobs] == [1] * len(jobs)
    assert TaskAttempt.objects.filter(task__job_attempt__job__in=jobs).count() == pods
    assert kube_server.count_requests("POST", PODS, status=201) == pods


@pytest.mark.parametrize("method, path", [("POST", PODS), ("DELETE", PODS[:-1] + "/[^/]+$")], ids=["creating", "deleting"])
@pytest.mark.django_db(transaction=True)
def test_an_api_server_down_mid_cycle_pauses_the_cluster_shows_it_and_loses_or_repeats_nothing(
    world, kube_cluster, kube_server, kubelet, submit, settings, method, path
):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    jobs = jobs_of(world, submit, 4, "outage")
    # The API server goes down after the 3rd pod was created (or finished pod deleted), in
    # the middle of a cycle, and stays down for 1.5 s: five of a call's retry budgets.
    kube_server.inject_outage(1.5, method=method, path_regex=path, after=3)
    rest = APIClient()
    rest.force_authenticate(world.root)
    seen = {}

    def stop():
        cluster = Cluster.objects.get(pk=kube_cluster.pk)
        if not cluster.api_available and "api" not in seen:
            # While it is down, the API and the admin say so.
            seen["api"] = rest.get(f"/api/v2/clusters/{cluster.name}/").json()
            rest.force_login(world.root)
            seen["admin"] = rest.get("/admin/clusters/cluster/").content.decode()
            seen["done"] = kube_server.count_requests(method, path, status=201 if method == "POST" else 200)
        if "api" in seen or method == "DELETE":
            play_kubelet(kubelet)
        # Done when every job succeeded and the cluster holds none of their pods.
        return all_succeeded(jobs) and cluster.api_available and not kubelet.pods()

    run_scheduler(tick=0.02, holder="me", duration=30, stop=stop)
    assert seen["api"]["api_available"] is False, seen["api"]
    assert "503" in seen["api"]["api_error"] and seen["api"]["api_unavailable_since"]
    assert "cluster API unavailable since" in seen["admin"]
    assert seen["done"] == 3
    assert Cluster.objects.get(pk=kube_cluster.pk).api_available
    assert_ran_once(jobs, kube_server, 8)


@pytest.mark.parametrize("method, path", [("DELETE", PODS[:-1] + "/[^/]+$"), ("GET", PODS[:-1] + "/[^/]+/log$")],
                         ids=["deletes", "logs"])
@pytest.mark.django_db(transaction=True)
def test_calls_failing_while_pods_end_lose_no_end_and_leave_no_pod(
    world, kube_cluster, kube_server, kubelet, submit, settings, method, path
):
    """Deleting finished pods, or reading the end of their logs, fails for a while (the
    rest of the API answers): the cycles cut short see the same pod changes again, and
    the pods they could not delete are deleted later."""
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    jobs = jobs_of(world, submit, 4, f"ending-{method.lower()}")
    kube_server.inject_fault(method, path, status=503, after=2, seconds=1.0)

    def stop():
        play_kubelet(kubelet)
        return all_succeeded(jobs) and not kubelet.pods()

    run_scheduler(tick=0.02, holder="me", duration=30, stop=stop)
    assert kube_server.count_requests(method, path, status=503) > 0
    assert not kubelet.pods()
    assert_ran_once(jobs, kube_server, 8)
    assert TaskLog.objects.filter(task_attempt__task__job_attempt__job__in=jobs).count() == 8


@pytest.mark.django_db(transaction=True)
def test_a_429_storm_is_waited_out_as_retry_after_says_up_to_a_bound(world, kube_cluster, kube_server, kubelet, submit, settings):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    settings.PAI_KUBE_CONCURRENCY = 1  # one call at a time: the gaps below are one call's retries
    jobs = jobs_of(world, submit, 3, "storm")
    # Every pod creation is refused for 1 s with Retry-After: 1; a call's budget is 0.3 s,
    # so it waits the bound (a third of the budget) between tries, not a hot loop.
    kube_server.inject_fault("POST", PODS, status=429, retry_after=1, after=2, seconds=1.0)

    def stop():
        play_kubelet(kubelet)
        return all_succeeded(jobs)

    run_scheduler(tick=0.02, holder="me", duration=30, stop=stop)
    refused = [r.at for r in kube_server.requests if r[0] == "POST" and r[3] == 429]
    gaps = [later - earlier for earlier, later in zip(refused, refused[1:])]
    assert 3 <= len(refused) <= 12, len(refused)
    assert min(gaps) >= 0.09, gaps  # Retry-After honoured, up to the bound of 0.1 s
    assert_ran_once(jobs, kube_server, 6)


def test_a_node_that_disappears_takes_its_pods_which_are_retried_elsewhere_once(world, kube_cluster, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("on-gone-node", roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}))
    worker = Worker(kube_cluster)
    try:
        def until(predicate):
            def step():
                kubelet.start_pending()
                kube_server.finalize_deletions()
                return predicate()
            worker.run_until(step, tick=0.01, timeout=10)

        until(lambda: Job.objects.get(pk=job.pk).state == "RUNNING")
        pod = kubelet.pod(job, "main")
        node = pod["spec"]["nodeName"]
        kube_server.delete_node(node)
        until(lambda: not Node.objects.get(cluster=world.cluster, name=node).ready)
        # The pod garbage collector removes the pods of a node that is gone.
        client.CoreV1Api(kube_server.api_client()).delete_namespaced_pod(
            pod["metadata"]["name"], pod["metadata"]["namespace"], grace_period_seconds=0
        )
        until(lambda: kubelet.pods(**{"pai.job": job_key(job), "pai.attempt": "1"}))
        retried = kubelet.pod(job, "main", attempt=1)
        assert retried["spec"]["nodeName"] != node
        first = Job.objects.get(pk=job.pk).attempts.order_by("index").first()
        assert first.exit_code == -101 and first.completed_at is not None
        kubelet.finish(retried, 0)
        until(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED")
    finally:
        worker.close()
    job = Job.objects.get(pk=job.pk)
    assert job.attempts.count() == 2 and job.retries == 1 and job.retries_user == 0
    assert kube_server.count_requests("POST", PODS, status=201) == 2


def test_a_pod_deleted_while_no_worker_watched_is_found_by_the_next_leaders_relist(world, kube_cluster, kubelet, kube_server, submit):
    job = submit(world.a_member, job_yaml("deleted-unwatched", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    worker = Worker(kube_cluster)
    try:
        worker.run_until(lambda: kubelet.start_pending() or Job.objects.get(pk=job.pk).state == "RUNNING", tick=0.01)
    finally:
        worker.close()
    # Between two leaders, someone deletes a pod.
    gone = kubelet.pod(job, "main", 1)
    client.CoreV1Api(kube_server.api_client()).delete_namespaced_pod(
        gone["metadata"]["name"], gone["metadata"]["namespace"], grace_period_seconds=0
    )
    worker = Worker(kube_cluster)
    try:
        worker.run_until(lambda: kube_server.finalize_deletions() or Job.objects.get(pk=job.pk).attempts.count() == 2, tick=0.01)
        first = Job.objects.get(pk=job.pk).attempts.order_by("index").first()
        assert first.exit_code == -101 and "vanished" in TaskAttempt.objects.get(pod_name=gone["metadata"]["name"]).diagnostics

        def step():
            play_kubelet(kubelet)
            return Job.objects.get(pk=job.pk).state == "SUCCEEDED"

        worker.run_until(step, tick=0.01)
    finally:
        worker.close()
    job = Job.objects.get(pk=job.pk)
    assert job.attempts.count() == 2 and job.retries == 1
    # Two pods for each attempt: the surviving pod of the first attempt was deleted, not reused.
    assert kube_server.count_requests("POST", PODS, status=201) == 4
