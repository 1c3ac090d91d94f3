"""List routes run the same number of queries whatever the number of rows they return."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.jobs.choices import JobState
from apps.jobs.models import Job, JobAttempt, Task, TaskAttempt
from apps.virtualclusters.models import PinnedCell
from tests import factories as f

LISTS = [
    "/api/v2/users",
    "/api/v2/users?limit=2&offset=1",
    "/api/v2/groups",
    "/api/v2/groups/team_a/userlist",
    "/api/v2/groups/default/userlist",
    "/api/v2/virtual-clusters",
    "/api/v2/storages",
    "/api/v2/tokens",
    "/api/v2/kubernetes/nodes",
    "/api/v2/kubernetes/pods",
    "/api/v2/tenants/",
    "/api/v2/clusters/",
    "/api/v2/clusters/local/cell-types/",
    "/api/v2/clusters/local/physical-cells/",
    "/api/v2/clusters/local/nodes/",
]

_batch = iter(range(1000))


def grow(world, client_for):
    """Add a few more of every listed thing: users in groups, VCs with cells, pins and jobs, storages, nodes."""
    n = next(_batch)
    tenant = f.TenantFactory(slug=f"extra-{n}")
    f.MembershipFactory(tenant=tenant, user=world.root)
    for i in range(3):
        user = f.UserFactory(username=f"extra{n}_{i}")
        user.groups.add(world.group_a)
        f.MembershipFactory(tenant=world.tenant_a, user=user)
        group = f.GroupFactory(name=f"extra{n}_{i}", tenant=tenant)
        vc = f.VirtualClusterFactory(name=f"extra{n}_{i}", tenant=tenant, cluster=world.cluster)
        f.VirtualClusterCellFactory(virtual_cluster=vc, cell_type=world.switch, count=1)
        f.VirtualClusterGrantFactory(virtual_cluster=vc, group=group)
        f.VirtualClusterGrantFactory(virtual_cluster=vc, group=world.group_a)
        storage = f.StorageConfigFactory(tenant=tenant, name=f"extra-{n}-{i}")
        f.StorageGrantFactory(storage=storage, group=group)
        f.StorageGrantFactory(storage=storage, group=world.group_a, is_default=True)
        f.NodeFactory(cluster=world.cluster, name=f"extra-{n}-{i}", gpu_capacity=8)
        cell = f.PhysicalCellFactory(cluster=world.cluster, cell_type=world.gpu_node, address=f"extra-{n}-{i}",
                                     pinned_id=f"pin-{n}-{i}")
        PinnedCell.objects.create(virtual_cluster=vc, physical_cell=cell)
        job = Job.objects.create(owner=user, tenant=world.tenant_a, virtual_cluster=world.vc_a, name=f"job{n}",
                                 protocol_text="", spec={}, state=JobState.RUNNING, cell_gpu=1)
        task = Task.objects.create(job_attempt=JobAttempt.objects.create(job=job, index=0), task_role="w", index=0)
        TaskAttempt.objects.create(task=task, index=0, pod_name=f"pod-{n}-{i}")
        client_for(world.root)
        client_for(world.a_admin)


def queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.content)
    return len(ctx.captured_queries)


@pytest.mark.parametrize("user", ["root", "a_admin"])
def test_list_query_counts_do_not_grow_with_rows(world, client_for, user):
    client = client_for(world.users()[user])
    grow(world, client_for)
    before = {url: queries(client, url) for url in LISTS if user == "root" or "kubernetes" not in url}
    grow(world, client_for)
    grow(world, client_for)
    after = {url: queries(client, url) for url in before}
    assert after == before
    assert all(count <= 20 for count in after.values()), after
