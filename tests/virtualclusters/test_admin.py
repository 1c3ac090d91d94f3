from django.test import override_settings
from django.urls import reverse

from apps.accounts.models import Group
from apps.virtualclusters.models import VirtualCluster


def vc_form(world, name, cells, pinned=()):
    data = {
        "name": name,
        "tenant": world.tenant_a.pk,
        "cluster": world.cluster.pk,
        "description": "",
        "cohort": "",
        "weight": "1.0",
        "pinned": list(pinned),
        "cells-TOTAL_FORMS": str(len(cells)),
        "cells-INITIAL_FORMS": "0",
        "cells-MIN_NUM_FORMS": "0",
        "cells-MAX_NUM_FORMS": "1000",
        "grants-TOTAL_FORMS": "0",
        "grants-INITIAL_FORMS": "0",
        "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000",
    }
    for i, (cell_type, count) in enumerate(cells):
        data[f"cells-{i}-cell_type"] = cell_type.pk
        data[f"cells-{i}-count"] = str(count)
    return data


def test_admin_refuses_a_vc_the_cluster_cannot_back(world, client):
    client.force_login(world.root)
    response = client.post(reverse("admin:virtualclusters_virtualcluster_add"), vc_form(world, "extra", [(world.gpu_node, 1)]))
    assert response.status_code == 200
    errors = [str(e) for e in response.context["inline_admin_formsets"][0].formset.non_form_errors()]
    # Every GPU node is already promised: the error says so, and who holds them, instead
    # of blaming the team whose cells the engine happened to count last.
    assert errors == [
        "Cluster local cannot back VC 'extra': it asks for 1 × A100-NODE and none is free (short by 1). "
        "The cluster has 32 A100 cells: team_a holds 2 × A100-NODE (16), "
        "team_b holds 1 × A100-NODE and 4 × A100-SWITCH (16); none is free."
    ]
    assert not VirtualCluster.objects.filter(name="extra").exists()


@override_settings(PAI_AUTH_MODE="basic")
def test_admin_creates_a_fitting_vc_with_its_group(world, client):
    world.vc_a.cells.filter(cell_type=world.gpu_node).update(count=1)
    client.force_login(world.root)
    response = client.post(
        reverse("admin:virtualclusters_virtualcluster_add"), vc_form(world, "vision", [(world.gpu_node, 1)])
    )
    assert response.status_code == 302
    vc = VirtualCluster.objects.get(name="vision")
    assert [(c.cell_type.name, c.count) for c in vc.cells.all()] == [("A100-NODE", 1)]
    assert vc.grants.get().group == Group.objects.get(name="vision", tenant=world.tenant_a)


def test_tenant_admin_sees_quota_read_only_and_manages_grants(world, client):
    client.force_login(world.a_admin)
    url = reverse("admin:virtualclusters_virtualcluster_change", args=[world.vc_a.pk])
    response = client.get(url)
    assert response.status_code == 200
    assert "pinned" not in response.context["adminform"].form.fields
    cells_formset, grants_formset = (f.formset for f in response.context["inline_admin_formsets"])
    assert not response.context["inline_admin_formsets"][0].has_change_permission
    assert response.context["inline_admin_formsets"][1].has_add_permission


def test_a_team_admin_reads_the_cluster_and_cell_types_inline_instead_of_refused_links(world, client):
    import re

    client.force_login(world.a_admin)
    page = client.get(f"/admin/virtualclusters/virtualcluster/{world.vc_a.pk}/change/")
    html = page.content.decode()
    links = set(re.findall(r'href="(/admin/[^"]+)"', html))
    assert [href for href in links if client.get(href.replace("&amp;", "&")).status_code == 403] == []
    assert "local (" in html and "6 nodes" in html
    assert "A100-NODE = 4 × A100-SWITCH of 2 × A100 (A100: 1 GPU, 8 CPU, 64 GiB each)" in html
