"""A submit checks the job against its VC's SKUs and leaf cells, which are cached
(`capacity.submit_limits`): every way of changing them must reach the next submit."""

import pytest

from apps.virtualclusters import services as vc_services
from apps.virtualclusters.models import VirtualClusterCell
from tests import factories as f
from tests.conftest import requires_postgres

from .conftest import job_document, submit


def _gang(gpus_per_instance, instances, priority_class="prod", name="gang"):
    document = job_document(name=name)
    document["taskRoles"]["taskrole"]["instances"] = instances
    document["taskRoles"]["taskrole"]["resourcePerInstance"].update(gpu=gpus_per_instance, cpu=8, memoryMB=16384)
    document["extras"]["hivedScheduler"]["jobPriorityClass"] = priority_class
    return document


def _message(response):
    return response.status_code, response.json().get("message")


@pytest.fixture
def spare_node(world):
    """A fifth GPU node, so that team_a's quota can grow."""
    return f.PhysicalCellFactory(cluster=world.cluster, cell_type=world.gpu_node, address="gpu-node-5")


def test_a_quota_raised_by_the_service_admits_a_larger_gang_at_once(world, api, spare_node):
    client = api(world.a_member)
    assert _message(submit(client, _gang(4, 5))) == (
        400, "taskRoles: the job needs 20 A100 leaf cells at once (gang allocation), more than virtual cluster "
             "'team_a' holds (16)")

    vc_services.set_quota(world.root, world.vc_a, [(world.gpu_node, 3), (world.cpu_node, 1)])

    assert submit(client, _gang(4, 5)).status_code == 202


def test_a_quota_lowered_by_the_service_refuses_what_no_longer_fits(world, api):
    client = api(world.a_member)
    assert submit(client, _gang(4, 4, name="first")).status_code == 202

    vc_services.set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])

    assert _message(submit(client, _gang(4, 4, name="second"))) == (
        400, "taskRoles: the job needs 16 A100 leaf cells at once (gang allocation), more than virtual cluster "
             "'team_a' holds (8)")


def test_a_vc_cell_row_saved_or_deleted_reaches_the_next_submit(world, api):
    # What the admin's cells inline does: one row saved, one deleted.
    client = api(world.a_member)
    assert submit(client, _gang(4, 5, name="before")).status_code == 400
    row = VirtualClusterCell.objects.get(virtual_cluster=world.vc_a, cell_type=world.gpu_node)
    row.count = 3
    row.save()
    assert submit(client, _gang(4, 5, name="grown")).status_code == 202

    row.delete()
    response = submit(client, _gang(1, 1, name="after"))
    assert response.status_code == 400
    assert "has no SKU 'A100'" in response.json()["message"]


def test_a_new_vc_accepts_jobs_at_once(world, api, spare_node):
    client = api(world.a_member)
    document = _gang(4, 2)
    document["defaults"]["virtualCluster"] = "team_a_new"
    assert submit(client, document).status_code == 404
    vc = vc_services.create_virtual_cluster(
        world.root, tenant=world.tenant_a, cluster=world.cluster, name="team_a_new",
        cells=[(world.gpu_node, 1)],
    )
    vc_services.grant_virtual_cluster(world.root, vc, world.group_a)
    assert submit(client, document).status_code == 202


def test_an_opportunistic_job_sees_a_physical_cell_added_to_the_cluster(world, api):
    client = api(world.a_member)
    response = submit(client, _gang(8, 5, priority_class="oppo"))
    assert _message(response) == (
        400, "taskRoles: the job needs 40 A100 leaf cells at once (gang allocation), more than cluster 'local' "
             "holds (32)")

    f.PhysicalCellFactory(cluster=world.cluster, cell_type=world.gpu_node, address="gpu-node-5")

    assert submit(client, _gang(8, 5, priority_class="oppo")).status_code == 202


@requires_postgres
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_limits_a_concurrent_submit_reads_during_a_quota_change_do_not_outlive_its_commit(world, api, spare_node):
    # Another web process submits while the change is open: it reads the committed (old)
    # rows, and caches them under the generation the change has already replaced.
    import threading

    from django.db import connection, transaction

    from apps.virtualclusters.capacity import submit_limits

    def concurrent_submit_reads_limits(seen):
        try:
            seen.append(submit_limits(world.vc_a)[1]["A100"])
        finally:
            connection.close()

    client = api(world.a_member)
    seen = []
    with transaction.atomic():
        vc_services.set_quota(world.root, world.vc_a, [(world.gpu_node, 3), (world.cpu_node, 1)])
        reader = threading.Thread(target=concurrent_submit_reads_limits, args=(seen,))
        reader.start()
        reader.join()
    assert seen == [16]  # the old quota, read before the commit

    assert submit(client, _gang(4, 5)).status_code == 202
