"""Checks of a job against its virtual cluster: existence, grants, SKUs, gang size."""

import pytest
from django.test import override_settings

from apps.jobs.models import Job
from tests import factories as f

from .conftest import job_document, submit


def _worker(document, **resources):
    document["taskRoles"]["taskrole"]["resourcePerInstance"].update(resources)
    return document


def _hived(document, **settings):
    document["extras"]["hivedScheduler"]["taskRoles"]["taskrole"] = settings
    return document


def _error(response):
    return response.status_code, response.json()["code"], response.json()["message"]


def test_an_unknown_vc_is_404(world, api):
    response = submit(api(world.a_member), job_document(defaults={"virtualCluster": "nowhere"}))

    assert _error(response) == (404, "NoVirtualClusterError",
                                "defaults.virtualCluster: virtual cluster nowhere is not found.")


def test_another_tenants_vc_answers_as_unknown(world, api):
    response = submit(api(world.a_member), job_document(defaults={"virtualCluster": "team_b"}))

    assert response.status_code == 404
    assert response.json()["code"] == "NoVirtualClusterError"


def test_a_vc_of_ones_tenant_not_granted_to_ones_groups_is_403(world, api):
    f.VirtualClusterFactory(name="team_a_private", tenant=world.tenant_a, cluster=world.cluster)
    response = submit(api(world.a_member), job_document(defaults={"virtualCluster": "team_a_private"}))

    assert _error(response) == (403, "ForbiddenUserError", "defaults.virtualCluster: user a_member is not allowed "
                                                           "to submit to virtual cluster team_a_private.")
    assert not Job.objects.exists()


def test_a_user_with_no_vc_and_no_default_gets_404(world, api):
    loner = f.UserFactory(username="loner")
    response = submit(api(loner), job_document(defaults=None))

    assert _error(response) == (404, "NoVirtualClusterError",
                                "defaults.virtualCluster: not given, and user loner has no virtual cluster.")


def test_a_sku_the_vc_lacks_is_400_with_what_it_has(world, api):
    f.CellTypeFactory(cluster=world.cluster, name="V100", gpu=1, cpu=6, memory_mb=32768)
    response = submit(api(world.a_member), _hived(job_document(), skuType="V100"))

    assert _error(response) == (400, "InvalidProtocolError",
                                "extras.hivedScheduler.taskRoles.taskrole.skuType: virtual cluster 'team_a' has no "
                                "SKU 'V100' (it has A100: 16 leaf cells, CPU: 8 leaf cells)")


def test_a_gang_larger_than_the_vc_is_400_with_the_numbers(world, api):
    document = job_document()
    document["taskRoles"]["taskrole"]["instances"] = 5
    response = submit(api(world.a_member), _worker(document, gpu=4, cpu=32, memoryMB=65536))

    assert _error(response) == (400, "InvalidProtocolError",
                                "taskRoles: the job needs 20 A100 leaf cells at once (gang allocation), more than "
                                "virtual cluster 'team_a' holds (16)")


def test_without_gang_allocation_only_each_instance_must_fit(world, api):
    document = job_document()
    document["taskRoles"]["taskrole"]["instances"] = 5
    document["extras"]["gangAllocation"] = False
    response = submit(api(world.a_member), _worker(document, gpu=4, cpu=32, memoryMB=65536))

    assert response.status_code == 202, response.json()
    assert Job.objects.get().leaf_cells == {"A100": 20}


def test_one_instance_larger_than_the_vc_is_400(world, api):
    response = submit(api(world.a_member), _worker(job_document(), gpu=17))

    assert _error(response) == (400, "InvalidProtocolError",
                                "taskRoles.taskrole: one instance needs 17 A100 leaf cells, more than virtual "
                                "cluster 'team_a' holds (16)")


@pytest.mark.parametrize(
    "resources,cells",
    [
        ({"gpu": 1, "cpu": 1, "memoryMB": 1024}, 1),
        ({"gpu": 2, "cpu": 8, "memoryMB": 1024}, 2),
        ({"gpu": 1, "cpu": 20, "memoryMB": 1024}, 3),  # 20 cpu / 8 per A100 cell
        ({"gpu": 1, "cpu": 1, "memoryMB": 200000}, 4),  # 200000 MB / 65536 per cell
    ],
)
def test_leaf_cells_cover_the_largest_of_gpu_cpu_and_memory(world, api, resources, cells):
    response = submit(api(world.a_member), _worker(job_document(), **resources))

    assert response.status_code == 202, response.json()
    assert Job.objects.get().leaf_cells == {"A100": cells}


def test_sku_number_overrides_the_computed_cells(world, api):
    response = submit(api(world.a_member), _hived(job_document(), skuType="A100", skuNumber=4))

    assert response.status_code == 202
    assert Job.objects.get().leaf_cells == {"A100": 4}


def test_a_cpu_only_task_uses_the_cpu_sku(world, api):
    document = _hived(_worker(job_document(), gpu=0, cpu=6, memoryMB=4096))
    response = submit(api(world.a_member), document)

    assert response.status_code == 202, response.json()
    job = Job.objects.get()
    assert job.leaf_cells == {"CPU": 2}
    assert (job.cell_gpu, job.cell_cpu, job.cell_memory_mb) == (0, 8, 32768)


def test_a_cpu_only_task_may_not_name_a_gpu_sku(world, api):
    response = submit(api(world.a_member), _worker(job_document(), gpu=0))

    assert _error(response) == (400, "InvalidProtocolError",
                                "extras.hivedScheduler.taskRoles.taskrole.skuType: a CPU-only task (gpu: 0) needs a "
                                "CPU SKU, and 'A100' has 1 GPU(s) per leaf cell")


def test_a_gpu_task_may_not_name_a_cpu_sku(world, api):
    response = submit(api(world.a_member), _hived(job_document(), skuType="CPU"))

    assert _error(response) == (400, "InvalidProtocolError",
                                "extras.hivedScheduler.taskRoles.taskrole.skuType: SKU 'CPU' has no GPU, and the "
                                "task asks for 1")


def test_a_vc_without_a_cpu_sku_rejects_cpu_only_tasks(world, api):
    gpu_only = f.VirtualClusterFactory(name="gpu_only", tenant=world.tenant_a, cluster=world.cluster)
    f.VirtualClusterCellFactory(virtual_cluster=gpu_only, cell_type=world.switch, count=1)
    f.VirtualClusterGrantFactory(virtual_cluster=gpu_only, group=world.group_a)
    document = _hived(_worker(job_document(defaults={"virtualCluster": "gpu_only"}), gpu=0))
    response = submit(api(world.a_member), document)

    assert _error(response) == (400, "InvalidProtocolError",
                                "taskRoles.taskrole: virtual cluster 'gpu_only' has no CPU SKU (gpu: 0) (it has "
                                "A100: 2 leaf cells)")


def test_a_storage_not_granted_is_400(world, api):
    document = job_document(extras={"storages": [{"name": "team-b-data"}]})
    response = submit(api(world.a_member), document)

    assert _error(response) == (400, "InvalidProtocolError",
                                "extras.storages[0].name: no storage named 'team-b-data' is granted to you")


def test_a_job_name_is_unique_per_owner(world, api):
    assert submit(api(world.a_member), job_document()).status_code == 202
    response = submit(api(world.a_member), job_document())

    assert _error(response) == (409, "ConflictJobError", "name: job mnist_single_gpu already exists for user a_member.")
    assert Job.objects.count() == 1
    # Another user may use the same name.
    assert submit(api(world.a_admin), job_document()).status_code == 202


@override_settings(PAI_THROTTLE_JOB_SUBMIT="2/hour")
def test_submissions_are_rate_limited_per_user(world, api):
    client = api(world.a_member)
    for name in ("one", "two"):
        assert submit(client, job_document(name=name)).status_code == 202
    response = submit(client, job_document(name="three"))

    assert response.status_code == 429
    assert response.json()["code"] == "TooManyRequestsError"
    assert int(response["Retry-After"]) > 0
    # Another user has their own budget.
    assert submit(api(world.a_admin), job_document(name="three")).status_code == 202


@override_settings(PAI_THROTTLE_JOB_LIST="3/min")
def test_job_lists_are_rate_limited_per_user(world, api):
    client = api(world.a_member)
    for _ in range(3):
        assert client.get("/api/v2/jobs").status_code == 200
    response = client.get("/api/v2/jobs")

    assert response.status_code == 429
    assert "Retry-After" in response
    assert api(world.b_member).get("/api/v2/jobs").status_code == 200
