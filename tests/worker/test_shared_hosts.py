"""A host carrying two SKUs and a pinned GPU pair inside a node, configured through the
inventory API and run for real on the local backend: each job gets its own devices."""

import pytest
import yaml
from rest_framework.test import APIClient

from apps.clusters.models import Node
from apps.jobs.models import TaskAttempt
from apps.virtualclusters.models import PinnedCell, VirtualClusterCell
from apps.virtualclusters.status import cluster_state, node_groups
from tests import factories as f

from .conftest import job_yaml


def configure_shared_hosts(world):
    """gpu-node-4 also carries 4 T4 (its devices 8-11, T4-NODE `gpu-node-4/8-11`), and
    host t4-host 4 T4 named by their range alone (`t4-host/0-3`); gpu-node-3's last A100
    pair (`gpu-node-3/6-7`) is pinned as `pair` for team_b.
    team_a gets one T4-NODE; team_b gives up one of its four A100-SWITCH cells."""
    root = APIClient()
    root.force_authenticate(world.root)
    base = "/api/v2/clusters/local"
    for cell_type in ({"name": "T4", "gpu": 1, "cpu": 4, "memory_mb": 16384},
                      {"name": "T4-NODE", "child": "T4", "child_count": 4, "is_node_level": True}):
        assert root.post(f"{base}/cell-types/", cell_type, format="json").status_code == 201
    refused = [
        ({"address": "gpu-node-4/6-9", "cell_type": "T4-NODE"}, "of host gpu-node-4 are also node gpu-node-4's"),
        ({"address": "gpu-node-4/8-10", "cell_type": "T4-NODE"}, "A T4-NODE holds 4 devices; gpu-node-4/8-10 names 3"),
        ({"address": "gpu-node-4/x", "cell_type": "T4-NODE"}, "no node name nor a host's device range"),
        ({"address": "gpu-node-3/5-6", "cell_type": "A100-SWITCH", "parent": "gpu-node-3"},
         "A A100-SWITCH inside gpu-node-3 is one of gpu-node-3/0-1, gpu-node-3/2-3, gpu-node-3/4-5, gpu-node-3/6-7."),
        ({"address": "gpu-node-3/6-7", "cell_type": "A100-SWITCH"}, "A A100-SWITCH is below the node level"),
    ]
    for cell, message in refused:
        response = root.post(f"{base}/physical-cells/", cell, format="json")
        assert response.status_code == 400, response.content
        assert message in response.json()["message"], response.json()
    for cell in ({"address": "gpu-node-4/8-11", "cell_type": "T4-NODE"}, {"address": "t4-host/0-3", "cell_type": "T4-NODE"},
                 {"address": "gpu-node-3/6-7", "cell_type": "A100-SWITCH", "parent": "gpu-node-3", "pinned_id": "pair"}):
        assert root.post(f"{base}/physical-cells/", cell, format="json").status_code == 201
    # Addresses with a device range are read back by address.
    shown = root.get(f"{base}/physical-cells/gpu-node-3/6-7/").json()
    assert (shown["parent"], shown["pinned_id"]) == ("gpu-node-3", "pair")
    assert root.get(f"{base}/physical-cells/gpu-node-4/8-11/").json()["cell_type"] == "T4-NODE"
    Node.objects.filter(cluster=world.cluster, name="gpu-node-4").update(gpu_capacity=12)
    f.NodeFactory(cluster=world.cluster, name="t4-host", gpu_capacity=4, cpu_capacity=16, memory_mb_capacity=65536)
    VirtualClusterCell.objects.filter(virtual_cluster=world.vc_b, cell_type=world.switch).update(count=3)
    f.VirtualClusterCellFactory(
        virtual_cluster=world.vc_a, cell_type=world.cluster.cell_types.get(name="T4-NODE"), count=1
    )
    PinnedCell.objects.create(virtual_cluster=world.vc_b, physical_cell=world.cluster.physical_cells.get(pinned_id="pair"))


def sku_job(name, *, vc="team_a", gpu=2, sku=None, pinned=None, command="echo visible=$CUDA_VISIBLE_DEVICES"):
    document = yaml.safe_load(job_yaml(name, vc=vc, roles={"main": {"gpu": gpu, "commands": [command]}}))
    hived = {key: value for key, value in (("skuType", sku), ("pinnedCellId", pinned)) if value}
    document["extras"]["hivedScheduler"]["taskRoles"] = {"main": hived}
    return yaml.safe_dump(document, sort_keys=False)


@pytest.fixture
def shared_hosts(world):
    configure_shared_hosts(world)
    return world


def test_each_sku_of_a_host_and_a_pinned_pair_run_on_their_own_devices(shared_hosts, worker, submit):
    world = shared_hosts
    jobs = {
        "t4": submit(world.a_member, sku_job("t4", sku="T4")),
        "pinned": submit(world.b_member, sku_job("pinned", vc="team_b", pinned="pair")),
        "whole": submit(world.a_member, sku_job("whole", gpu=8, sku="A100")),
    }
    seen = {}
    for name, job in jobs.items():
        job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
        assert job.state == "SUCCEEDED", job.attempts.first().exit_diagnostics
        ta = TaskAttempt.objects.get(task__job_attempt__job=job)
        log = worker.controller.backend.read_log(ta.pod_name)
        seen[name] = (ta.node_name, ta.device_indices, log.split("visible=")[1].split()[0])
    # The T4 job's devices are the host's 8 and 9, the pinned pair's gpu-node-3's 6 and 7.
    assert seen["t4"] == ("gpu-node-4", [8, 9], "8,9")
    assert seen["pinned"] == ("gpu-node-3", [6, 7], "6,7")
    node, devices, visible = seen["whole"]
    assert len(devices) == 8 and max(devices) < 8 and visible == ",".join(map(str, devices))
    assert node != "gpu-node-3"  # a node with a pinned pair is no whole node of anyone's quota
    # The cluster page shows the host's T4 part as a node of its chain; the host's health reaches both parts.
    Node.objects.filter(cluster=world.cluster, name__in=["gpu-node-4", "t4-host"]).update(ready=False)
    tiles = {t.name: t for group in node_groups(cluster_state(world.cluster)) for t in group.nodes}
    t4 = tiles["gpu-node-4/8-11"]
    assert (t4.sku, t4.devices, t4.healthy, t4.bad) == ("T4", 4, False, 4)
    assert not tiles["gpu-node-4"].healthy and tiles["gpu-node-3"].healthy
    assert not tiles["t4-host/0-3"].healthy
