"""Virtual clusters, storages, Kubernetes lists, and the native tenant and cluster routes."""

import pytest

from apps.jobs.choices import JobState
from apps.jobs.models import Job, JobAttempt, Task, TaskAttempt
from apps.storage.choices import StorageKind
from tests import factories as f

from .openpai import assert_error, assert_openpai

TEAM_A_GUARANTEED = {"cpu": 160, "memory": 1179648, "gpu": 16, "vCores": 160, "GPUs": 16}
CLUSTER_TOTAL = {"cpu": 320, "memory": 2359296, "gpu": 32, "vCores": 320, "GPUs": 32}


def running_job(world, owner=None, vc=None, name="train", gpu=8):
    return Job.objects.create(
        owner=owner or world.a_member, tenant=world.tenant_a, virtual_cluster=vc or world.vc_a, name=name,
        protocol_text="", spec={}, state=JobState.RUNNING, cell_cpu=gpu * 8, cell_memory_mb=gpu * 65536, cell_gpu=gpu,
    )


# --- Virtual clusters -----------------------------------------------------------------
def test_vc_list_has_guaranteed_total_and_used(world, clients):
    running_job(world)
    response = clients["a_member"].get("/api/v2/virtual-clusters")
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["team_a"]
    vc = body["team_a"]
    assert_openpai("VirtualCluster", vc)
    assert vc["resourcesGuaranteed"] == TEAM_A_GUARANTEED
    assert vc["resourcesTotal"] == CLUSTER_TOTAL
    assert vc["resourcesUsed"] == {"cpu": 64, "memory": 524288, "gpu": 8, "vCores": 64, "GPUs": 8}
    assert vc["capacity"] == 50.0 and vc["usedCapacity"] == 25.0 and vc["maxCapacity"] == 50.0
    assert vc["dedicated"] is False
    assert vc["guaranteedCells"] == {"A100": 16, "CPU": 8} and vc["cluster"] == "local"


def test_waiting_unplaced_jobs_do_not_use_resources(world, clients):
    job = running_job(world)
    job.state = JobState.WAITING
    job.save()
    assert clients["a_member"].get("/api/v2/virtual-clusters/team_a").json()["resourcesUsed"]["gpu"] == 0


def test_vc_with_cohort_may_grow_and_pinned_cells_make_it_dedicated(world, clients):
    world.vc_b.cohort = "shared"
    world.vc_b.save()
    cell = world.cluster.physical_cells.get(address="gpu-node-4")
    cell.pinned_id = "pin-4"
    cell.save()
    from apps.virtualclusters.models import PinnedCell

    PinnedCell.objects.create(virtual_cluster=world.vc_b, physical_cell=cell)
    vc = clients["b_member"].get("/api/v2/virtual-clusters/team_b").json()
    assert vc["maxCapacity"] == 100.0 and vc["dedicated"] is True
    assert vc["guaranteedCells"] == {"A100": 24, "CPU": 8}


def test_vc_list_for_admins_and_grants_across_teams(world, clients):
    assert list(clients["root"].get("/api/v2/virtual-clusters").json()) == ["team_a", "team_b"]
    f.VirtualClusterGrantFactory(virtual_cluster=world.vc_b, group=world.group_a)
    assert list(clients["a_member"].get("/api/v2/virtual-clusters").json()) == ["team_a", "team_b"]


def test_vc_detail_of_another_team_is_404(world, clients):
    assert_error(clients["a_member"].get("/api/v2/virtual-clusters/team_b"), 404, "NoVirtualClusterError")
    assert_error(clients["root"].get("/api/v2/virtual-clusters/nope"), 404, "NoVirtualClusterError")


# --- Storages -------------------------------------------------------------------------
def test_storage_list_shows_granted_storages(world, clients):
    response = clients["a_member"].get("/api/v2/storages")
    assert response.status_code == 200
    body = response.json()
    assert_openpai("StorageSummary", body)
    assert body == {"storages": [{"name": "team-a-data", "share": True, "volumeName": "team-a-data", "default": True,
                                  "readOnly": False, "mountPath": "/mnt/team-a-data"}]}
    names = [s["name"] for s in clients["root"].get("/api/v2/storages").json()["storages"]]
    assert names == ["team-a-data", "team-b-data"]


def test_storage_default_filter(world, clients):
    f.StorageGrantFactory(storage=f.StorageConfigFactory(tenant=world.tenant_a, name="team-a-extra"),
                          group=world.group_a)
    assert len(clients["a_member"].get("/api/v2/storages").json()["storages"]) == 2
    defaults = clients["a_member"].get("/api/v2/storages?default=true").json()["storages"]
    assert [s["name"] for s in defaults] == ["team-a-data"]
    assert len(clients["a_member"].get("/api/v2/storages?default=false").json()["storages"]) == 2
    assert clients["a_member"].get("/api/v2/storages?default=maybe").status_code == 400


@pytest.mark.parametrize("kind,data", [
    (StorageKind.NFS, {"server": "10.0.0.1", "path": "/export/team-a"}),
    (StorageKind.SMB, {"address": "//files.example.com/export/team-a"}),
    (StorageKind.AZURE_FILE, {"shareName": "export", "accountName": "acct"}),
    (StorageKind.AZURE_BLOB, {"containerName": "export", "accountName": "acct"}),
    (StorageKind.CEPHFS, {}),
])
def test_storage_detail_shapes(world, clients, kind, data):
    server = world.storage_a.server
    server.kind = kind
    server.address = {"nfs": "10.0.0.1", "smb": "//files.example.com"}.get(kind, "acct")
    server.options = {"nfsvers": "4.1", "ro": True}
    server.save()
    world.storage_a.sub_path = "team-a"
    world.storage_a.save()
    response = clients["a_member"].get("/api/v2/storages/team-a-data")
    assert response.status_code == 200
    body = response.json()
    assert_openpai("StorageDetail", body)
    assert body["data"] == data
    assert body["mountOptions"] == ["nfsvers=4.1", "ro"] and body["subPath"] == "team-a"


def test_storage_of_own_team_not_granted_is_403_and_other_teams_404(world, clients):
    f.StorageConfigFactory(tenant=world.tenant_a, name="team-a-secret")
    assert_error(clients["a_member"].get("/api/v2/storages/team-a-secret"), 403, "ForbiddenUserError")
    assert_error(clients["a_member"].get("/api/v2/storages/team-b-data"), 404, "NoStorageError")
    assert_error(clients["a_member"].get("/api/v2/storages/nope"), 404, "NoStorageError")
    assert clients["root"].get("/api/v2/storages/team-a-secret").status_code == 200


def test_storage_shared_with_another_team_is_readable_by_it(world, clients):
    f.StorageGrantFactory(storage=world.storage_b, group=world.group_a)
    assert clients["a_member"].get("/api/v2/storages/team-b-data").status_code == 200


# --- Kubernetes -----------------------------------------------------------------------
def test_kubernetes_nodes_are_admin_only_in_nodelist_shape(world, clients):
    node = world.cluster.nodes.get(name="gpu-node-1")
    node.ip, node.ready, node.labels = "10.0.0.11", False, {"pai.sku": "A100"}
    node.save()
    assert_error(clients["a_member"].get("/api/v2/kubernetes/nodes"), 403, "ForbiddenUserError")
    response = clients["root"].get("/api/v2/kubernetes/nodes")
    assert response.status_code == 200
    body = response.json()
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert [n["metadata"]["name"] for n in body["items"]] == [
        "cpu-node-1", "cpu-node-2", "gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"]
    gpu = body["items"][2]
    assert gpu["metadata"]["labels"] == {"pai.sku": "A100"}
    assert gpu["status"]["capacity"] == {"cpu": "64", "memory": "524288Mi", "nvidia.com/gpu": "8"}
    assert {"type": "InternalIP", "address": "10.0.0.11"} in gpu["status"]["addresses"]
    assert gpu["status"]["conditions"][0]["type"] == "Ready" and gpu["status"]["conditions"][0]["status"] == "False"
    assert "nvidia.com/gpu" not in body["items"][0]["status"]["capacity"]


def test_kubernetes_pods_are_admin_only_and_come_from_task_attempts(world, clients):
    job = running_job(world)
    attempt = JobAttempt.objects.create(job=job, index=0, state=JobState.RUNNING)
    task = Task.objects.create(job_attempt=attempt, task_role="worker", index=1, state=JobState.RUNNING)
    TaskAttempt.objects.create(task=task, index=2, state=JobState.RUNNING, pod_name="a-member-train-worker-1",
                               node_name="gpu-node-1", ip="10.0.0.11")
    TaskAttempt.objects.create(task=task, index=3, state=JobState.WAITING)
    assert_error(clients["a_admin"].get("/api/v2/kubernetes/pods"), 403, "ForbiddenUserError")
    body = clients["root"].get("/api/v2/kubernetes/pods").json()
    assert body["kind"] == "PodList"
    (pod,) = body["items"]
    assert pod["metadata"]["name"] == "a-member-train-worker-1"
    key = f"pai-{job.pk}-{int(job.submitted_at.timestamp())}"
    assert pod["metadata"]["labels"] == {"pai.job": key, "pai.taskrole": "worker", "pai.task-index": "1",
                                         "pai.attempt": "0", "pai.task-attempt": "2"}
    assert pod["metadata"]["namespace"] == "pai-team-a"
    assert pod["metadata"]["annotations"] == {"pai/job": "a_member~train"}
    assert pod["spec"]["nodeName"] == "gpu-node-1" and pod["status"]["phase"] == "Running"
    assert len(clients["root"].get("/api/v2/kubernetes/pods?namespace=pai-team-a").json()["items"]) == 1
    for other in ("pai-team-b", "kube-system"):
        assert clients["root"].get(f"/api/v2/kubernetes/pods?namespace={other}").json()["items"] == []


# --- Native routes --------------------------------------------------------------------
def test_tenants_are_scoped_and_paginated(world, clients):
    body = clients["a_member"].get("/api/v2/tenants/").json()
    assert body["count"] == 1 and body["results"][0]["slug"] == "team-a"
    assert clients["a_member"].get("/api/v2/tenants/team-b/").status_code == 404
    body = clients["root"].get("/api/v2/tenants/?ordering=-name&limit=1").json()
    assert body["count"] == 2 and [t["slug"] for t in body["results"]] == ["team-b"]
    assert [t["slug"] for t in clients["root"].get("/api/v2/tenants/?name=team a").json()["results"]] == ["team-a"]


def test_tenants_are_read_only(world, clients):
    assert clients["root"].post("/api/v2/tenants/", {"slug": "x", "name": "X"}, format="json").status_code == 405


def test_cluster_inventory(world, clients):
    client = clients["b_member"]
    clusters = client.get("/api/v2/clusters/").json()
    assert clusters["count"] == 1 and clusters["results"][0]["name"] == "local"
    assert "connection" not in clusters["results"][0]
    assert client.get("/api/v2/clusters/local/").json()["cluster_class"] == "production"
    skus = client.get("/api/v2/clusters/local/cell-types/?leaf=true").json()["results"]
    assert [c["name"] for c in skus] == ["A100", "CPU"]
    node_level = client.get("/api/v2/clusters/local/cell-types/A100-NODE/").json()
    assert node_level["child"] == "A100-SWITCH" and node_level["is_node_level"] is True
    cells = client.get("/api/v2/clusters/local/physical-cells/?parent=rack-1").json()["results"]
    assert [c["address"] for c in cells] == ["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"]
    nodes = client.get("/api/v2/clusters/local/nodes/?ordering=-gpu_capacity&limit=2").json()
    assert nodes["count"] == 6 and all(n["gpu_capacity"] == 8 for n in nodes["results"])
    assert client.get("/api/v2/clusters/nope/nodes/").status_code == 404
    assert client.get("/api/v2/clusters/local/nodes/nope/").status_code == 404
    assert client.get("/api/v2/clusters/?cluster_class=bogus").status_code == 400


def test_platform_admins_change_the_inventory(world, clients):
    root = clients["root"]
    data = {"name": "gpu2", "cluster_class": "non-production", "backend": "kubernetes", "connection": "in-cluster"}
    response = root.post("/api/v2/clusters/", data, format="json")
    assert response.status_code == 201, response.content
    assert "connection" not in response.json()
    from apps.audit.models import AuditEntry
    from apps.clusters.models import Cluster

    assert Cluster.objects.get(name="gpu2").connection == "in-cluster"
    assert AuditEntry.objects.filter(action="cluster.create", actor=world.root).exists()
    response = root.patch("/api/v2/clusters/gpu2/", {"description": "staging"}, format="json")
    assert response.status_code == 200 and response.json()["description"] == "staging"
    assert (response.json()["api_qps"], response.json()["api_burst"]) == (200.0, 400)
    response = root.patch("/api/v2/clusters/gpu2/", {"api_qps": 250, "api_burst": 600}, format="json")
    assert response.status_code == 200 and (response.json()["api_qps"], response.json()["api_burst"]) == (250.0, 600)
    assert (Cluster.objects.get(name="gpu2").api_qps, Cluster.objects.get(name="gpu2").api_burst) == (250.0, 600)
    # Where the worker reads its pods' GPU utilisation (apps.monitoring.efficiency).
    assert response.json()["gpu_utilization_query"] == "DCGM_FI_DEV_GPU_UTIL"
    response = root.patch("/api/v2/clusters/gpu2/", {"prometheus_url": "http://prometheus.monitoring:9090",
                                                     "gpu_utilization_query": 'DCGM_FI_DEV_GPU_UTIL{Hostname!=""}'},
                          format="json")
    assert response.status_code == 200, response.content
    assert Cluster.objects.get(name="gpu2").prometheus_url == "http://prometheus.monitoring:9090"
    sku = {"name": "H100", "gpu": 1, "cpu": 16, "memory_mb": 131072}
    assert root.post("/api/v2/clusters/gpu2/cell-types/", sku, format="json").status_code == 201
    node = {"name": "H100-NODE", "child": "H100", "child_count": 8, "is_node_level": True}
    assert root.post("/api/v2/clusters/gpu2/cell-types/", node, format="json").status_code == 201
    cell = {"address": "h100-node-1", "cell_type": "H100-NODE"}
    assert root.post("/api/v2/clusters/gpu2/physical-cells/", cell, format="json").status_code == 201
    assert root.delete("/api/v2/clusters/gpu2/physical-cells/h100-node-1/").status_code == 204
    assert AuditEntry.objects.filter(action="physicalcell.delete").exists()


@pytest.mark.parametrize("url,data,field", [
    ("/api/v2/clusters/", {"name": "local"}, "name"),
    ("/api/v2/clusters/", {"name": "bad name"}, "name"),
    ("/api/v2/clusters/", {"name": "x", "cluster_class": "staging"}, "cluster_class"),
    ("/api/v2/clusters/", {"name": "x", "api_qps": 0}, "api_qps"),
    ("/api/v2/clusters/", {"name": "x", "api_qps": "fast"}, "api_qps"),
    ("/api/v2/clusters/", {"name": "x", "api_burst": 0}, "api_burst"),
    ("/api/v2/clusters/", {"name": "x", "prometheus_url": "not a url"}, "prometheus_url"),
    ("/api/v2/clusters/", {"name": "x", "gpu_utilization_query": "q" * 501}, "gpu_utilization_query"),
    ("/api/v2/clusters/", {"name": "x", "api_burst": 10**9}, "api_burst"),
    ("/api/v2/clusters/local/cell-types/", {"name": "A100"}, "Name already exists"),
    ("/api/v2/clusters/local/cell-types/", {"name": "X", "child": "A100", "child_count": 0}, "child_count"),
    ("/api/v2/clusters/local/cell-types/", {"name": "X", "child": "nope", "child_count": 1}, "child"),
    ("/api/v2/clusters/local/physical-cells/", {"address": "n", "cell_type": "CPU-NODE", "parent": "rack-1"},
     "cell_type"),
    ("/api/v2/clusters/local/physical-cells/", {"address": "gpu-node-1", "cell_type": "A100-NODE"},
     "Address already exists"),
])
def test_inventory_writes_are_validated(world, clients, url, data, field):
    response = clients["root"].post(url, data, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["message"]


def test_inventory_rows_in_use_are_not_deleted(world, clients):
    root = clients["root"]
    assert_error(root.delete("/api/v2/clusters/local/"), 409, "ConflictError")
    assert_error(root.delete("/api/v2/clusters/local/cell-types/A100/"), 409, "ConflictError")
    assert root.get("/api/v2/clusters/local/cell-types/A100/").status_code == 200


def test_only_platform_admins_write_the_inventory(world, clients):
    for who in ("a_admin", "a_member"):
        assert_error(clients[who].post("/api/v2/clusters/", {"name": "x"}, format="json"), 403, "ForbiddenUserError")
        assert_error(clients[who].delete("/api/v2/clusters/local/cell-types/CPU/"), 403, "ForbiddenUserError")


def test_nodes_are_kept_by_the_worker(world, clients):
    assert clients["root"].post("/api/v2/clusters/local/nodes/", {"name": "x"}, format="json").status_code == 405
    assert clients["root"].delete("/api/v2/clusters/local/nodes/cpu-node-1/").status_code == 405
