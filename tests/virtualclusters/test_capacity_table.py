"""Capacity an admin can see: the VC admin's table (per SKU, chain and cell type: the
cluster's cells, what each VC holds, what is free), and a quota smaller than what
running jobs hold, which needs a confirmation naming those jobs."""

import re
import time

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.jobs.worker.controller import Controller
from apps.virtualclusters.quotas import cluster_capacity
from apps.virtualclusters.services import set_quota
from tests.worker.conftest import job_yaml

from .test_admin import vc_form


def rows(html, sku):
    """{(chain, cell type): (cells, guaranteed, pinned, free)} of one SKU's table in a page."""
    table = re.search(rf'<table class="capacity-table" data-sku="{sku}">(.*?)</table>', html, re.S).group(1)
    out = {}
    for chain, cell_type, body in re.findall(
        r'<tr class="capacity-row" data-chain="([^"]*)" data-cell-type="([^"]*)">(.*?)</tr>', table, re.S
    ):
        cells = {name: re.sub(r"\s+", " ", value).strip() for name, value in re.findall(r'<td class="(\w+)">(.*?)</td>', body, re.S)}
        out[(chain, cell_type)] = (cells["cells"], cells["guaranteed"], cells["pinned"], cells["spare"])
    return out


def test_a_platform_admin_reads_every_vcs_holding_and_what_is_free(world, client):
    client.force_login(world.root)
    html = client.get(reverse("admin:virtualclusters_virtualcluster_change", args=[world.vc_a.pk])).content.decode()
    assert rows(html, "A100") == {
        ("A100-RACK", "A100-RACK"): ("1", "—", "—", "0"),
        ("A100-RACK", "A100-NODE"): ("4", "team_a 2, team_b 1", "—", "0"),
        ("A100-RACK", "A100-SWITCH"): ("16", "team_b 4", "—", "0"),
        ("A100-RACK", "A100"): ("32", "—", "—", "0"),
    }
    assert rows(html, "CPU") == {
        ("CPU-NODE", "CPU-NODE"): ("2", "team_a 1, team_b 1", "—", "0"),
        ("CPU-NODE", "CPU"): ("16", "—", "—", "0"),
    }
    # After a shrink the freed node shows as free at each size.
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])
    html = client.get(reverse("admin:virtualclusters_virtualcluster_capacity")).content.decode()
    assert rows(html, "A100")[("A100-RACK", "A100-NODE")] == ("4", "team_a 1, team_b 1", "—", "1")
    assert rows(html, "A100")[("A100-RACK", "A100")] == ("32", "—", "—", "8")
    assert "32 leaf cells, 8 free" in html


def test_a_team_admin_sees_their_vc_by_name_and_other_teams_only_as_such(world, client):
    client.force_login(world.a_admin)
    html = client.get(reverse("admin:virtualclusters_virtualcluster_change", args=[world.vc_a.pk])).content.decode()
    assert rows(html, "A100")[("A100-RACK", "A100-NODE")] == ("4", "team_a 2, other teams 1", "—", "0")
    assert rows(html, "A100")[("A100-RACK", "A100-SWITCH")] == ("16", "other teams 4", "—", "0")
    assert "team_b" not in html
    page = client.get(reverse("admin:virtualclusters_virtualcluster_capacity"))
    assert page.status_code == 200 and "team_b" not in page.content.decode()
    # A member has no admin at all.
    client.force_login(world.a_member)
    assert client.get(reverse("admin:virtualclusters_virtualcluster_capacity")).status_code == 302


def test_the_capacity_page_is_linked_from_the_vc_list(world, client):
    client.force_login(world.root)
    html = client.get(reverse("admin:virtualclusters_virtualcluster_changelist")).content.decode()
    assert f'href="{reverse("admin:virtualclusters_virtualcluster_capacity")}" id="capacity-link"' in html


def test_the_table_names_chains_and_pinned_cells_when_a_cluster_has_several(world):
    from apps.virtualclusters.models import PinnedCell
    from tests import factories as f

    # A standalone GPU node, pinned to team_b: a second A100 chain.
    node = f.PhysicalCellFactory(cluster=world.cluster, cell_type=world.gpu_node, address="gpu-node-5", pinned_id="pin-5")
    PinnedCell.objects.create(virtual_cluster=world.vc_b, physical_cell=node)
    [a100] = [s for s in cluster_capacity(world.cluster, world.root).skus if s.sku == "A100"]
    by = {(r.chain, r.cell_type): (r.cells, r.guaranteed, r.pinned, r.spare) for r in a100.rows}
    assert by[("any", "A100-NODE")] == (5, [("team_a", 2), ("team_b", 1)], [("team_b", 1)], 0)
    assert by[("A100-NODE", "A100-NODE")] == (1, [], [("team_b", 1)], 0)
    assert by[("A100-RACK", "A100-NODE")] == (4, [], [], 0)


@pytest.fixture
def running_jobs(world):
    """Two team_a jobs holding its two guaranteed GPU nodes (placed by the worker's scheduler, no pods)."""
    client = APIClient()
    client.force_authenticate(world.a_member)
    for name in ("train-1", "train-2"):
        response = client.post(
            "/api/v2/jobs", job_yaml(name, roles={"main": {"gpu": 8, "commands": ["sleep 60"]}}), content_type="text/yaml"
        )
        assert response.status_code == 202, response.content
    controller = Controller(world.cluster)
    try:
        controller.refresh_configuration()
        controller.schedule(time.time())
    finally:
        controller.close()
    jobs = list(Job.objects.filter(placement__isnull=False).order_by("name"))
    assert [j.name for j in jobs] == ["train-1", "train-2"]
    return jobs


def test_shrinking_below_running_jobs_names_them_and_needs_confirmation(world, running_jobs):
    with pytest.raises(ValidationError) as excinfo:
        set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])
    [message] = excinfo.value.messages
    assert excinfo.value.error_list[0].code == "shrink"
    assert message.startswith("The new quota of VC 'team_a' is below what its running jobs hold: 1 job would lose its guarantee")
    # One of the two jobs keeps the remaining node; the other is named, with its cells.
    named = [j for j in running_jobs if f"a_member~{j.name} (8 cells:" in message]
    assert len(named) == 1
    assert world.vc_a.cells.get(cell_type=world.gpu_node).count == 2  # nothing changed
    # Growing, or keeping what the jobs hold, needs no confirmation.
    set_quota(world.root, world.vc_a, [(world.gpu_node, 2)])
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)], confirm_shrink=True)
    assert world.vc_a.cells.get(cell_type=world.gpu_node).count == 1


def test_the_admin_asks_to_confirm_a_shrink_below_running_jobs(world, running_jobs, client):
    client.force_login(world.root)
    url = reverse("admin:virtualclusters_virtualcluster_change", args=[world.vc_a.pk])
    data = vc_form(world, "team_a", [(world.gpu_node, 1), (world.cpu_node, 1)])
    cells = list(world.vc_a.cells.order_by("pk"))
    data.update({"cells-INITIAL_FORMS": "2", "cells-0-id": cells[0].pk, "cells-1-id": cells[1].pk,
                 "cells-0-virtual_cluster": world.vc_a.pk, "cells-1-virtual_cluster": world.vc_a.pk})
    data.update({f"cells-{i}-cell_type": c.cell_type_id for i, c in enumerate(cells)})
    data.update({f"cells-{i}-count": "1" for i in range(2)})
    response = client.post(url, data)
    assert response.status_code == 200
    [error] = [str(e) for e in response.context["inline_admin_formsets"][0].formset.non_form_errors()]
    assert "would lose its guarantee" in error and "Shrink below running jobs" in error
    assert world.vc_a.cells.get(cell_type=world.gpu_node).count == 2
    response = client.post(url, {**data, "confirm_shrink": "on"})
    assert response.status_code == 302
    assert world.vc_a.cells.get(cell_type=world.gpu_node).count == 1
