"""Quota entries bound to a chain (HiveD's CHAIN.TYPE): stored on the VC, set and read
through the API and the admin, shown in the capacity table, and obeyed by the worker."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from apps.jobs.models import TaskAttempt
from apps.virtualclusters.models import VirtualClusterCell
from apps.virtualclusters.quotas import cluster_capacity
from apps.virtualclusters.services import vc_spec
from tests import factories as f
from tests.worker.conftest import Worker, job_yaml

QUOTA = "/api/v2/virtual-clusters/{}/quota"


class Racks:
    """Cluster `racks`, one SKU G (8 per node): standalone nodes solo-1/2, rack r3 (3
    nodes, type RACK3) and rack r4 (4 nodes, RACK4). VC `racked` of team A, empty."""

    def __init__(self, world):
        c = self.cluster = f.ClusterFactory(name="racks")
        self.g = f.CellTypeFactory(cluster=c, name="G", gpu=1, cpu=4, memory_mb=16384)
        self.node = f.CellTypeFactory(cluster=c, name="NODE", child=self.g, child_count=8, is_node_level=True)
        self.rack3 = f.CellTypeFactory(cluster=c, name="RACK3", child=self.node, child_count=3)
        self.rack4 = f.CellTypeFactory(cluster=c, name="RACK4", child=self.node, child_count=4)
        for i in (1, 2):
            f.PhysicalCellFactory(cluster=c, cell_type=self.node, address=f"solo-{i}")
        for rack_type, rack, size in ((self.rack3, "r3", 3), (self.rack4, "r4", 4)):
            parent = f.PhysicalCellFactory(cluster=c, cell_type=rack_type, address=rack)
            for i in range(1, size + 1):
                f.PhysicalCellFactory(cluster=c, cell_type=self.node, address=f"{rack}-n{i}", parent=parent)
        names = ["solo-1", "solo-2"] + [f"r3-n{i}" for i in range(1, 4)] + [f"r4-n{i}" for i in range(1, 5)]
        for name in names:
            f.NodeFactory(cluster=c, name=name, gpu_capacity=8, cpu_capacity=32, memory_mb_capacity=131072)
        self.vc = f.VirtualClusterFactory(name="racked", tenant=world.tenant_a, cluster=c)
        f.VirtualClusterGrantFactory(virtual_cluster=self.vc, group=world.group_a)


@pytest.fixture
def racks(world):
    return Racks(world)


def client_for(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_quota_naming_its_chain_is_set_through_the_api_and_the_vcs_job_lands_in_that_rack(world, racks, settings, tmp_path):
    settings.PAI_DATA_DIR = tmp_path
    root = client_for(world.root)
    body = {"cells": [{"cellType": "NODE", "chain": "RACK3", "count": 2}]}
    response = root.put(QUOTA.format("racked"), body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["cells"] == [{"cellType": "NODE", "chain": "RACK3", "count": 2}]
    assert vc_spec(racks.vc).cells == (("RACK3.NODE", 2),)
    # A member of the team reads it.
    assert client_for(world.a_member).get(QUOTA.format("racked")).json()["cells"][0]["chain"] == "RACK3"

    # Both of the VC's jobs run inside r3, never on the standalone nodes or r4.
    worker = Worker(racks.cluster)
    try:
        member = client_for(world.a_member)
        for name in ("one", "two"):
            text = job_yaml(name, vc="racked", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}})
            assert member.post("/api/v2/jobs", data=text, content_type="text/yaml").status_code == 202
        worker.cycle()
        nodes = sorted(TaskAttempt.objects.filter(task__job_attempt__job__virtual_cluster=racks.vc)
                       .values_list("node_name", flat=True))
        assert len(nodes) == 2 and all(n.startswith("r3-") for n in nodes), nodes
        detail = member.get("/api/v2/jobs/a_member~one").json()
        assert detail["taskRoles"]["main"]["taskStatuses"][0]["containerNodeName"].startswith("r3-")
    finally:
        for pod in worker.controller.backend.list_pods():
            worker.controller.backend.delete_pod(pod.name, grace_seconds=0)
        worker.close()


def test_without_the_chain_the_same_jobs_go_elsewhere(world, racks, settings, tmp_path):
    """The control for the test above: the engine's own preference is not rack r3."""
    settings.PAI_DATA_DIR = tmp_path
    response = client_for(world.root).put(QUOTA.format("racked"), {"cells": [{"cellType": "NODE", "count": 2}]},
                                          format="json")
    assert response.status_code == 200, response.content
    worker = Worker(racks.cluster)
    try:
        member = client_for(world.a_member)
        for name in ("one", "two"):
            text = job_yaml(name, vc="racked", roles={"main": {"gpu": 8, "commands": ["sleep 30"]}})
            assert member.post("/api/v2/jobs", data=text, content_type="text/yaml").status_code == 202
        worker.cycle()
        nodes = sorted(TaskAttempt.objects.filter(task__job_attempt__job__virtual_cluster=racks.vc)
                       .values_list("node_name", flat=True))
        assert len(nodes) == 2 and not any(n.startswith("r3-") for n in nodes), nodes
    finally:
        for pod in worker.controller.backend.list_pods():
            worker.controller.backend.delete_pod(pod.name, grace_seconds=0)
        worker.close()


@pytest.mark.parametrize(
    "entry, field, words",
    [
        ({"cellType": "NODE", "chain": "RACK9", "count": 1}, "cells[0].chain", "has no cell type 'RACK9'"),
        ({"cellType": "NODE", "chain": "G", "count": 1}, "cells[0].chain", "G names no chain of cluster racks"),
        ({"cellType": "RACK4", "chain": "RACK3", "count": 1}, "cells[0].chain", "Chain RACK3 holds no RACK4 cells"),
        ({"cellType": "A100-NODE", "count": 1}, "cells[0].cellType", "has no cell type 'A100-NODE'"),
        ({"cellType": "NODE", "chain": "RACK3", "count": 4}, "cells", "asks for 4 × RACK3.NODE and only 3 are free"),
        ({"cellType": "NODE", "chain": "RACK3", "count": 0}, "cells[0].count", "greater than or equal to 1"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_field_and_nothing_is_written(world, racks, entry, field, words):
    response = client_for(world.root).put(QUOTA.format("racked"), {"cells": [entry]}, format="json")
    assert response.status_code == 400, response.content
    message = response.json()["message"]
    assert message.startswith(f"{field}: ") and words in message, message
    assert not VirtualClusterCell.objects.filter(virtual_cluster=racks.vc).exists()


def test_an_entry_listed_twice_is_refused_on_the_second(world, racks):
    entry = {"cellType": "NODE", "chain": "RACK3", "count": 1}
    response = client_for(world.root).put(QUOTA.format("racked"), {"cells": [entry, entry]}, format="json")
    assert response.status_code == 400
    assert response.json()["message"].startswith("cells[1].cellType: RACK3.NODE is listed twice")


def test_only_platform_admins_change_a_quota_and_other_tenants_do_not_see_it(world, racks):
    body = {"cells": [{"cellType": "NODE", "chain": "RACK3", "count": 1}]}
    assert client_for(world.a_admin).put(QUOTA.format("racked"), body, format="json").status_code == 403
    assert client_for(world.b_member).get(QUOTA.format("racked")).status_code == 404
    assert client_for(world.b_admin).put(QUOTA.format("racked"), body, format="json").status_code == 404
    assert not VirtualClusterCell.objects.filter(virtual_cluster=racks.vc).exists()


def vc_form(vc, cells):
    """The VC admin's change form with `cells` [(cell type, count, chain)] as new rows."""
    data = {
        "name": vc.name, "tenant": vc.tenant_id, "cluster": vc.cluster_id, "description": "", "cohort": "",
        "weight": "1.0", "pinned": [],
        "cells-TOTAL_FORMS": str(len(cells)), "cells-INITIAL_FORMS": "0", "cells-MIN_NUM_FORMS": "0",
        "cells-MAX_NUM_FORMS": "1000",
        "grants-TOTAL_FORMS": "0", "grants-INITIAL_FORMS": "0", "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000",
    }
    for i, (cell_type, count, chain) in enumerate(cells):
        data[f"cells-{i}-cell_type"] = cell_type.pk
        data[f"cells-{i}-chain"] = chain.pk if chain is not None else ""
        data[f"cells-{i}-count"] = str(count)
    return data


def test_the_admin_sets_the_chain_and_the_capacity_table_shows_it_in_that_chain(world, racks, client):
    client.force_login(world.root)
    url = reverse("admin:virtualclusters_virtualcluster_change", args=[racks.vc.pk])
    form = vc_form(racks.vc, [(racks.node, 2, racks.rack3)])
    form["grants-TOTAL_FORMS"] = "1"
    form["grants-INITIAL_FORMS"] = "1"
    form["grants-0-id"] = racks.vc.grants.get().pk
    form["grants-0-virtual_cluster"] = racks.vc.pk
    form["grants-0-group"] = world.group_a.pk
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert [str(c) for c in racks.vc.cells.all()] == ["2 × RACK3.NODE"]
    capacity = cluster_capacity(racks.cluster, world.root)
    rows = {(r.chain, r.cell_type): r for r in capacity.skus[0].rows}
    assert rows[("RACK3", "NODE")].guaranteed == [("racked", 2)] and rows[("RACK3", "NODE")].spare == 1
    assert rows[("any", "NODE")].guaranteed == [] and rows[("RACK4", "NODE")].guaranteed == []
    html = client.get(url).content.decode()
    assert 'data-chain="RACK3" data-cell-type="NODE"' in html

    # A chain that holds no such cells is refused on its line of the inline.
    form = vc_form(racks.vc, [(racks.rack4, 1, racks.rack3)])
    html = client.post(url, form).content.decode()
    assert "Chain RACK3 holds no RACK4 cells." in html
    assert [str(c) for c in racks.vc.cells.all()] == ["2 × RACK3.NODE"]


def test_a_team_admin_reads_the_chain_of_each_entry(world, racks, client):
    VirtualClusterCell.objects.create(virtual_cluster=racks.vc, cell_type=racks.node, chain=racks.rack3, count=1)
    client.force_login(world.a_admin)
    html = client.get(reverse("admin:virtualclusters_virtualcluster_change", args=[racks.vc.pk])).content.decode()
    assert "RACK3" in html and "chain" in html


def test_the_starvation_threshold_is_set_per_vc_through_the_api_and_reaches_the_engine(world, racks):
    from apps.audit.models import AuditEntry

    root = client_for(world.root)
    body = {"cells": [{"cellType": "NODE", "count": 1}], "starvationThresholdSeconds": 600}
    response = root.put(QUOTA.format("racked"), body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["starvationThresholdSeconds"] == 600
    racks.vc.refresh_from_db()
    assert vc_spec(racks.vc).starvation_threshold == 600.0
    assert AuditEntry.objects.filter(action="virtualcluster.starvation_threshold").count() == 1
    # Absent: kept; null: back to the scheduler's default.
    root.put(QUOTA.format("racked"), {"cells": [{"cellType": "NODE", "count": 1}]}, format="json")
    assert client_for(world.a_member).get(QUOTA.format("racked")).json()["starvationThresholdSeconds"] == 600
    root.put(QUOTA.format("racked"), {**body, "starvationThresholdSeconds": None}, format="json")
    racks.vc.refresh_from_db()
    assert racks.vc.starvation_threshold is None and vc_spec(racks.vc).starvation_threshold is None
    response = root.put(QUOTA.format("racked"), {**body, "starvationThresholdSeconds": 0}, format="json")
    assert response.status_code == 400
    assert response.json()["message"].startswith("starvationThresholdSeconds: ")


def test_the_admin_sets_the_starvation_threshold(world, racks, client):
    client.force_login(world.root)
    url = reverse("admin:virtualclusters_virtualcluster_change", args=[racks.vc.pk])
    form = vc_form(racks.vc, [(racks.node, 1, None)])
    form["starvation_threshold"] = "900"
    form["grants-TOTAL_FORMS"] = "1"
    form["grants-INITIAL_FORMS"] = "1"
    form["grants-0-id"] = racks.vc.grants.get().pk
    form["grants-0-virtual_cluster"] = racks.vc.pk
    form["grants-0-group"] = world.group_a.pk
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    racks.vc.refresh_from_db()
    assert racks.vc.starvation_threshold == 900
    assert vc_spec(racks.vc).starvation_threshold == 900.0


@pytest.mark.parametrize(
    "body, field",
    [
        ([], "non_field_errors"),
        ({"cells": "NODE"}, "cells"),
        ({"cells": [{"cellType": None, "count": 1}]}, "cells[0].cellType"),
        ({"cells": [{"cellType": "NODE", "count": 10**12}]}, "cells[0].count"),
        ({"cells": [{"cellType": "x" * 500, "count": 1}]}, "cells[0].cellType"),
        ({"cells": [{"cellType": "NODE", "count": 1}] * 201}, "cells"),
        ({"cells": [], "starvationThresholdSeconds": "soon"}, "starvationThresholdSeconds"),
    ],
)
def test_junk_is_a_400_naming_the_field(world, racks, body, field):
    response = client_for(world.root).put(QUOTA.format("racked"), body, format="json")
    assert response.status_code == 400, response.content
    message = response.json()["message"]
    assert message.startswith(f"{field}: ") or (field == "non_field_errors" and "dictionary" in message), message
    assert not VirtualClusterCell.objects.filter(virtual_cluster=racks.vc).exists()
