"""The scheduler loop with a Kubernetes cluster: what it drops it closes, and a cluster whose
API is down is paused and shown while the others go on."""

import threading
import time
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from rest_framework.test import APIClient

from apps.clusters.models import Cluster
from apps.jobs.models import Job, WorkerLease
from apps.jobs.worker import lease
from apps.jobs.worker.loop import run_scheduler
from tests import factories as f
from tests.worker.conftest import job_yaml, submit  # noqa: F401 (submit is a fixture)

from .conftest import eventually


def kube_threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("pai-kube-"))


# The loop closes old database connections between passes, as a worker process does.
@pytest.mark.django_db(transaction=True)
def test_every_dropped_controller_closes_its_threads_and_connections(world, kube_cluster, kube_server, settings):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    samples = []

    def steal_lease():
        WorkerLease.objects.update(holder="another-worker", expires_at=Now() + timedelta(seconds=60))

    def give_back_lease():
        WorkerLease.objects.update(expires_at=Now() - timedelta(seconds=1))

    def lead_with_failing_cycles():
        # A refusal the client does not retry: every new controller's first cycle fails
        # (its first relist) and the controller is dropped.
        kube_server.inject_fault("GET", r"^/api/v1/pods$", status=403, count=1_000_000)
        give_back_lease()

    # (what to do after the pass, whether the pass should have left nothing behind)
    script = [(None, False), (None, False), (steal_lease, False), (None, True), (give_back_lease, False), (None, False),
              (steal_lease, False), (lead_with_failing_cycles, True), (None, True), (None, True),
              (kube_server.clear_faults, False), (None, False), (steal_lease, False), (None, True)]

    def stop():
        action, nothing_left = script[len(samples)]
        if nothing_left:
            # A closed client's connections end on the server within its check interval.
            eventually(lambda: kube_server.open_connections() == 0 and kube_server.active_watches() == 0, timeout=3)
        samples.append((len(kube_threads()), kube_server.open_connections(), kube_server.active_watches()))
        if action is not None:
            action()
        return len(samples) == len(script)

    run_scheduler(tick=0.01, holder="me", stop=stop)
    leading = samples[1]
    assert leading[0] >= 2 and leading[2] >= 2, samples  # the pod and node watches, at least
    assert samples[3] == (0, 0, 0), samples  # the lease lost: nothing of the controller is left
    assert samples[5] == leading, samples  # leading again: one controller's worth
    assert samples[8] == samples[9] == (0, 0, 0), samples  # every failed cycle's controller closed
    assert samples[11] == leading and samples[13] == (0, 0, 0), samples
    assert kube_threads() == [] and kube_server.open_connections() == 0


@pytest.fixture
def second_cluster(world):
    """A local cluster of one CPU node beside the world's, with a VC for team A."""
    cluster = f.ClusterFactory(name="box")
    cpu = f.CellTypeFactory(cluster=cluster, name="BOX-CPU", gpu=0, cpu=1, memory_mb=1024, device_resource="")
    node = f.CellTypeFactory(cluster=cluster, name="BOX-NODE", child=cpu, child_count=4, is_node_level=True)
    f.PhysicalCellFactory(cluster=cluster, cell_type=node, address="box-node-1")
    f.NodeFactory(cluster=cluster, name="box-node-1", cpu_capacity=4, memory_mb_capacity=4096)
    vc = f.VirtualClusterFactory(name="box_a", tenant=world.tenant_a, cluster=cluster)
    f.VirtualClusterCellFactory(virtual_cluster=vc, cell_type=node, count=1)
    f.VirtualClusterGrantFactory(virtual_cluster=vc, group=world.group_a)
    return cluster


@pytest.mark.django_db(transaction=True)
def test_a_cluster_whose_api_is_down_is_paused_and_shown_while_others_go_on(
    world, kube_cluster, kube_server, second_cluster, submit, settings
):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    kube_server.inject_fault("*", r"^/api", status=503, count=1_000_000, retry_after=0)
    job = submit(world.a_member, job_yaml("elsewhere", vc="box_a", roles={"main": {"gpu": 0, "commands": ["echo hi"]}}))
    seen = {}

    def stop():
        cluster = Cluster.objects.get(pk=kube_cluster.pk)
        if not cluster.api_available and "down" not in seen:
            seen["down"] = cluster
            seen["requests"] = kube_server.count_requests()
        if Job.objects.get(pk=job.pk).state == "SUCCEEDED" and "down" in seen and "recovered" not in seen:
            # Paused: probes only, a few a second, not a call per job or pod.
            seen["probes"] = kube_server.count_requests() - seen["requests"]
            kube_server.clear_faults()
            seen["recovered"] = time.monotonic()
        return "recovered" in seen and cluster.api_available

    run_scheduler(tick=0.05, holder="me", duration=60, stop=stop)
    down = seen["down"]
    assert "503" in down.api_error and down.api_unavailable_since is not None
    assert seen["probes"] < 40
    assert Cluster.objects.get(pk=kube_cluster.pk).api_available

    # While it was down, the API and the admin showed it.
    Cluster.objects.filter(pk=kube_cluster.pk).update(
        api_available=False, api_error=down.api_error, api_unavailable_since=down.api_unavailable_since
    )
    client = APIClient()
    client.force_authenticate(world.root)
    shown = client.get(f"/api/v2/clusters/{kube_cluster.name}/").json()
    assert shown["api_available"] is False and "503" in shown["api_error"] and shown["api_unavailable_since"]
    client.force_login(world.root)
    page = client.get("/admin/clusters/cluster/").content.decode()
    assert "cluster API unavailable since" in page


def test_a_deposed_leader_stops_at_its_next_write(world, kube_cluster, kube_server, submit, settings):
    """In one process: the lease is taken from under a running controller; its fence refuses
    the next write once it cannot be sure, and nothing more reaches the cluster."""
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    job = submit(world.a_member, job_yaml("fenced", roles={"main": {"instances": 2, "gpu": 1, "commands": ["true"]}}))
    fence = lease.Fence("me")
    assert fence.hold()
    from apps.jobs.worker.controller import Controller

    controller = Controller(kube_cluster, fence=fence)
    try:
        controller.refresh_configuration()
        controller.schedule(time.time())
        WorkerLease.objects.update(holder="another-worker", expires_at=Now() + timedelta(seconds=60))
        fence.lapse()
        posts = kube_server.count_requests("POST")
        with pytest.raises(lease.LeaseLost):
            controller.create_missing_pods()
        assert kube_server.count_requests("POST") == posts
        assert kube_server.list_objects("pods") == []
        assert Job.objects.get(pk=job.pk).state == "WAITING"
    finally:
        controller.close()


@pytest.mark.django_db(transaction=True)
def test_a_controller_dropped_for_a_new_connection_or_a_deleted_cluster_closes_its_backend(
    world, kube_cluster, kube_server, settings, tmp_path
):
    settings.PAI_SCHEDULER_LEASE_SECONDS = 60
    # A second cluster on the same API server (an empty one: no cells yet).
    second = f.ClusterFactory(name="second", backend="kubernetes", connection=kube_cluster.connection)
    moved = kube_server.write_kubeconfig(tmp_path / "moved-kubeconfig", context="moved")
    samples = []

    def settle():
        # A closed client's connections end on the server within its check interval.
        expected = len(kube_threads())
        eventually(lambda: kube_server.active_watches() == expected, timeout=3)

    script = [
        None,
        lambda: Cluster.objects.filter(pk=second.pk).delete(),
        lambda: Cluster.objects.filter(pk=kube_cluster.pk).update(connection=f"kubeconfig:{moved}#moved"),
        lambda: Cluster.objects.filter(pk=kube_cluster.pk).update(backend="local", connection=""),
    ]

    def stop():
        if samples:
            settle()
        samples.append((len(kube_threads()), kube_server.open_connections(), kube_server.active_watches()))
        if len(samples) <= len(script) and script[len(samples) - 1] is not None:
            script[len(samples) - 1]()
        return len(samples) == len(script) + 1

    run_scheduler(tick=0.01, holder="me", stop=stop)
    both, one, moved_one, none = samples[1:]
    assert both[0] == 2 * one[0] and both[2] == 2 * one[2], samples  # the deleted cluster's controller closed
    assert moved_one[0] == one[0] and moved_one[2] == one[2], samples  # the old connection's controller closed
    assert none[0] == none[2] == 0, samples  # a cluster no longer on Kubernetes leaves nothing behind
    eventually(lambda: kube_server.open_connections() == 0, timeout=3)
