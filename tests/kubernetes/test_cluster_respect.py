"""pai binds pods to nodes itself: it must respect what kube-scheduler would. Other pods'
requests, cordons, taints and NotReady nodes keep pai's pods off a node; the dedicated
taint does not; a WaitForFirstConsumer claim gets its volume where the pod runs."""

from types import SimpleNamespace

import pytest

from apps.clusters.models import Node
from apps.jobs.models import Job, TaskAttempt
from apps.jobs.worker.backends import cells_used_by_others
from scheduler.backends import PodSpec, StorageMount, TransientCreationError
from tests.worker.conftest import Worker, job_yaml, submit  # noqa: F401 (submit is a fixture)
from tests.worker.test_shared_hosts import shared_hosts  # noqa: F401 (a fixture)

from .conftest import eventually, make_backend
from .test_worker import Driver

DEDICATED = [{"key": "pai.dedicated", "value": "true", "effect": "NoSchedule"}]


def other_pod(name, node, gpus, cpu="1", memory="1Gi"):
    """A pod pai does not manage, bound to `node` (another scheduler's, a DaemonSet's)."""
    resources = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory} if gpus else {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": name, "labels": {"app": "other"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": {"limits": resources}}]},
    }


@pytest.fixture
def drive(kube_cluster, kubelet):
    driver = Driver(Worker(kube_cluster), kubelet)
    yield driver
    driver.worker.close()


def node_of(job):
    return TaskAttempt.objects.get(task__job_attempt__job=job).node_name


def test_other_pods_cordons_and_taints_keep_pai_off_and_the_dedicated_taint_does_not(
        world, kube_cluster, kube_server, drive, submit):
    # gpu-node-1: another scheduler's pod holds all 8 devices; gpu-node-2 is cordoned;
    # gpu-node-3 has a taint pai does not tolerate; gpu-node-4 only pai's own taint.
    kube_server.create_object("pods", other_pod("trainer", "gpu-node-1", 8), namespace="default")
    kube_server.run_pod("default", "trainer")
    kube_server.set_node_unschedulable("gpu-node-2")
    kube_server.add_node("gpu-node-3", gpus=8, taints=[{"key": "team", "value": "infra", "effect": "NoSchedule"}])
    kube_server.add_node("gpu-node-4", gpus=8, taints=DEDICATED)

    first = submit(world.a_member, job_yaml("first", roles={"main": {"gpu": 8, "commands": ["true"]}}))
    first = drive.wait_for_state(first, "RUNNING")
    assert node_of(first) == "gpu-node-4"
    pod = kube_server.get_object("pods", TaskAttempt.objects.get(task__job_attempt__job=first).pod_name, "pai-team-a")
    assert pod["spec"]["tolerations"] == [{"key": "pai.dedicated", "operator": "Exists"}]
    nodes = {n.name: n for n in Node.objects.filter(cluster=kube_cluster)}
    assert nodes["gpu-node-1"].gpu_used_by_others == 8 and nodes["gpu-node-1"].schedulable
    assert not nodes["gpu-node-2"].schedulable and not nodes["gpu-node-3"].schedulable
    assert nodes["gpu-node-4"].schedulable
    used = drive.worker.controller.engine.node_status("gpu-node-1").used
    assert len(used) == 8 and {u.job_id for u in used} == {"<foreign>"}

    # Nowhere left for a second whole node: it waits, and goes where the other pod was once it ended.
    second = submit(world.a_member, job_yaml("second", roles={"main": {"gpu": 8, "commands": ["true"]}}))
    for _ in range(3):
        drive.worker.cycle()
    assert Job.objects.get(pk=second.pk).state == "WAITING"
    assert not TaskAttempt.objects.filter(task__job_attempt__job=second).exclude(pod_uid="").exists()
    kube_server.finish_pod("default", "trainer", 0)
    second = drive.wait_for_state(second, "RUNNING")
    assert node_of(second) == "gpu-node-1"
    assert Node.objects.get(cluster=kube_cluster, name="gpu-node-1").gpu_used_by_others == 0


def spec(name, node="gpu-node-1", gpu=1, **fields):
    return PodSpec(name=name, namespace="pai-team-x", node=node, commands="true", gpu=gpu,
                   devices=tuple(range(gpu)), cpu=1, memory_mb=1024, **fields)


def test_the_backend_checks_the_node_before_binding_a_pod(kube_server):
    kube_server.add_node("gpu-node-1", gpus=4, cpu="8", memory="16Gi", taints=DEDICATED)
    kube_server.create_object("pods", other_pod("daemon", "gpu-node-1", 1, cpu="6"), namespace="default")
    backend = make_backend(kube_server)
    try:
        # Others hold 1 device and 6 CPUs: 3 devices and 2 CPUs are left.
        eventually(lambda: backend.list_nodes()[0].gpu_used_by_others == 1)
        assert backend.list_nodes()[0].cpu_used_by_others == 6.0
        backend.create_pod(spec("p0", gpu=2))
        with pytest.raises(TransientCreationError, match=r"node gpu-node-1 cannot take it now: devices: 2 wanted, "
                                                         r"4 allocatable, 1 requested by other pods and 2 by pai's"):
            backend.create_pod(spec("p1", gpu=2))
        backend.create_pod(spec("p1", gpu=1))
        with pytest.raises(TransientCreationError, match="CPU: 1 wanted, 8 allocatable, 6 requested by other pods"):
            backend.create_pod(spec("p2", gpu=0))
        assert kube_server.get_object("pods", "p2", "pai-team-x") is None
        # A pai pod that ended holds nothing: its room is free again.
        kube_server.run_pod("pai-team-x", "p0")
        kube_server.finish_pod("pai-team-x", "p0", 0)
        eventually(lambda: any(o.name == "p0" and o.terminal for o in backend.poll(None)))
        backend.create_pod(spec("p3", gpu=2))
        # Cordoned, tainted, not Ready: refused, saying why.
        kube_server.set_node_unschedulable("gpu-node-1")
        eventually(lambda: not backend.list_nodes()[0].schedulable)
        with pytest.raises(TransientCreationError, match="it is cordoned"):
            backend.create_pod(spec("p4", gpu=0))
        kube_server.add_node("gpu-node-1", gpus=4, cpu="8", memory="16Gi", ready=False,
                             taints=DEDICATED + [{"key": "gpu", "value": "broken", "effect": "NoExecute"}])
        eventually(lambda: not backend.list_nodes()[0].ready)
        with pytest.raises(TransientCreationError, match=r"not Ready; it has taints pai does not tolerate: gpu=broken:NoExecute"):
            backend.create_pod(spec("p4", gpu=0))
    finally:
        backend.close()


def test_a_wait_for_first_consumer_claim_gets_its_volume_on_the_pods_node(kube_server):
    kube_server.add_node("gpu-node-1", gpus=4)
    kube_server.add_node("gpu-node-2", gpus=4)
    kube_server.create_object("namespaces", {"metadata": {"name": "pai-team-x"}})
    kube_server.add_storage_class("local-nvme", binding_mode="WaitForFirstConsumer")
    kube_server.add_storage_class("nfs", binding_mode="Immediate")
    kube_server.add_pvc("pai-team-x", "scratch", phase="Pending", storage_class="local-nvme")
    kube_server.add_pvc("pai-team-x", "shared", phase="Pending", storage_class="nfs")
    backend = make_backend(kube_server)
    try:
        mounts = (StorageMount(name="scratch", claim="scratch", mount_path="/scratch"),)
        created = backend.create_pod(spec("p0", node="gpu-node-2", storage_mounts=mounts))
        claim = kube_server.get_object("persistentvolumeclaims", "scratch", "pai-team-x")
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "gpu-node-2"
        # The pod starts: the provisioner made the volume on its node.
        assert kube_server.run_pod("pai-team-x", created.name) is not None
        assert kube_server.get_object("persistentvolumeclaims", "scratch", "pai-team-x")["status"]["phase"] == "Bound"
        # An Immediate claim still waiting for its provisioner is not pai's to place: left as it is.
        shared = (StorageMount(name="shared", claim="shared", mount_path="/shared"),)
        created = backend.create_pod(spec("p1", storage_mounts=shared))
        claim = kube_server.get_object("persistentvolumeclaims", "shared", "pai-team-x")
        assert "volume.kubernetes.io/selected-node" not in (claim["metadata"].get("annotations") or {})
        assert kube_server.run_pod("pai-team-x", created.name) is None
    finally:
        backend.close()


def test_another_pods_cpu_keeps_pai_off_the_cells_it_takes(world, kube_cluster, kube_server, drive, submit):
    # gpu-node-1..4 each have 64 CPUs for 8 leaf cells of 8 CPUs (no spare). A pod pai does
    # not manage takes 20 CPUs of gpu-node-1 and no device: 5 of its cells are left.
    for name in ("gpu-node-2", "gpu-node-3", "gpu-node-4"):
        kube_server.set_node_unschedulable(name)
    kube_server.create_object("pods", other_pod("etl", "gpu-node-1", 0, cpu="20"), namespace="default")
    kube_server.run_pod("default", "etl")
    drive.worker.cycle()
    node = Node.objects.get(cluster=kube_cluster, name="gpu-node-1")
    assert (node.gpu_used_by_others, node.cells_used_by_others) == (0, 3)
    assert len(drive.worker.controller.engine.node_status("gpu-node-1").used) == 3

    # A whole node does not fit there now: it waits, and no pod is tried (pai's 8 pods of
    # 8 CPUs would not fit beside the other pod's 20).
    whole = submit(world.a_member, job_yaml("whole", roles={"main": {"gpu": 8, "commands": ["true"]}}))
    for _ in range(3):
        drive.worker.cycle()
    assert Job.objects.get(pk=whole.pk).state == "WAITING"
    assert not TaskAttempt.objects.filter(task__job_attempt__job=whole).exists()
    # Five cells do.
    five = submit(world.a_member, job_yaml("five", roles={"main": {"gpu": 5, "commands": ["true"]}}))
    five = drive.wait_for_state(five, "RUNNING")
    assert node_of(five) == "gpu-node-1"

    # The other pod ends: its cells come back (the whole node still waits for the five).
    kube_server.finish_pod("default", "etl", 0)
    drive.run_until(lambda: Node.objects.get(cluster=kube_cluster, name="gpu-node-1").cells_used_by_others == 0)
    assert len(drive.worker.controller.engine.node_status("gpu-node-1").used) == 5


def test_a_nodes_spare_cpu_is_spent_before_its_cells(world):
    info = SimpleNamespace(name="gpu-node-1", gpu_used_by_others=0, cpu=72.0, cpu_used_by_others=8.0,
                           memory_mb=524288, memory_mb_used_by_others=0)
    assert cells_used_by_others(world.cluster, info) == 0  # 8 spare CPUs hold a DaemonSet's 8
    info.cpu_used_by_others = 8.5
    assert cells_used_by_others(world.cluster, info) == 1
    info.cpu_used_by_others, info.gpu_used_by_others = 0.0, 2
    assert cells_used_by_others(world.cluster, info) == 2
    info.memory_mb_used_by_others = 524288  # all of it
    assert cells_used_by_others(world.cluster, info) == 8
    info.name = "unknown-node"
    assert cells_used_by_others(world.cluster, info) == 2  # no cell describes it: its devices alone


def test_on_a_host_of_two_skus_others_devices_count_as_devices(shared_hosts):
    # gpu-node-4: 8 A100 (`gpu-node-4`) and 4 T4 (`gpu-node-4/8-11`). Ten devices others hold
    # are ten leaf cells across both SKUs, not capped at one SKU's eight.
    info = SimpleNamespace(name="gpu-node-4", gpu_used_by_others=10, cpu=96.0, cpu_used_by_others=0.0,
                           memory_mb=524288, memory_mb_used_by_others=0)
    assert cells_used_by_others(shared_hosts.cluster, info) == 10
    info.name = "t4-host"  # its one node named by its range
    assert cells_used_by_others(shared_hosts.cluster, info) == 10
    info.name, info.gpu_used_by_others = "gpu-node-3", 10
    assert cells_used_by_others(shared_hosts.cluster, info) == 8  # one SKU: at most its node's cells
