import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from apps.accounts.models import Group
from apps.audit.models import AuditEntry
from apps.virtualclusters.models import VirtualCluster, VirtualClusterGrant
from apps.virtualclusters.services import create_virtual_cluster, set_quota, validate_quotas


def test_world_quotas_fit_the_cluster(world):
    validate_quotas(world.cluster)


def test_a_quota_beyond_the_cluster_is_refused_naming_type_level_and_shortfall(world):
    # The rack has 4 GPU nodes; team_a holds 2 and team_b 1 node plus 4 switches (one node's worth).
    with pytest.raises(ValidationError) as excinfo:
        set_quota(world.root, world.vc_a, [(world.gpu_node, 3), (world.cpu_node, 1)])
    # team_b holds two nodes' worth (a node and four switches): two of the four are left
    # for team_a, which asks for three. The message names team_a's shortage, not team_b's.
    assert excinfo.value.messages == [
        "Cluster local cannot back VC 'team_a': it asks for 3 × A100-NODE and only 2 are free (short by 1). "
        "The cluster has 32 A100 cells: team_b holds 1 × A100-NODE and 4 × A100-SWITCH (16); 16 are free."
    ]
    # Nothing half-written: the old quota stands.
    assert sorted((c.cell_type.name, c.count) for c in world.vc_a.cells.all()) == [("A100-NODE", 2), ("CPU-NODE", 1)]


def test_a_new_vc_that_does_not_fit_is_not_created(world):
    with pytest.raises(ValidationError) as excinfo:
        create_virtual_cluster(
            world.root, tenant=world.tenant_a, cluster=world.cluster, name="extra", cells=[(world.cpu_node, 1)]
        )
    assert "CPU-NODE" in excinfo.value.messages[0]
    assert not VirtualCluster.objects.filter(name="extra").exists()


def test_shrinking_a_quota_fits_and_is_audited(world):
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1)])
    entry = AuditEntry.objects.get(action="virtualcluster.quota")
    assert entry.changes["cells"] == [["1 × CPU-NODE", "2 × A100-NODE"], ["1 × A100-NODE"]]
    # The freed node can now go to a new VC.
    create_virtual_cluster(world.root, tenant=world.tenant_b, cluster=world.cluster, name="spare", cells=[(world.gpu_node, 1)])


@override_settings(PAI_AUTH_MODE="basic")
def test_basic_mode_vc_creates_its_same_named_group_with_a_grant(world):
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])
    vc = create_virtual_cluster(
        world.root, tenant=world.tenant_a, cluster=world.cluster, name="vision", cells=[(world.gpu_node, 1)]
    )
    group = Group.objects.get(name="vision")
    assert group.tenant == world.tenant_a
    assert VirtualClusterGrant.objects.filter(virtual_cluster=vc, group=group).exists()
    assert AuditEntry.objects.filter(action="virtualcluster.create", object_id=str(vc.pk)).exists()
    assert AuditEntry.objects.filter(action="group.create", object_id=str(group.pk)).exists()
    # The converse is not implied: a new group makes no VC.
    Group.objects.create(name="nlp", tenant=world.tenant_a)
    assert not VirtualCluster.objects.filter(name="nlp").exists()


@override_settings(PAI_AUTH_MODE="oidc")
def test_oidc_mode_keeps_groups_and_vcs_independent(world):
    set_quota(world.root, world.vc_a, [(world.gpu_node, 1), (world.cpu_node, 1)])
    create_virtual_cluster(world.root, tenant=world.tenant_a, cluster=world.cluster, name="vision", cells=[(world.gpu_node, 1)])
    assert not Group.objects.filter(name="vision").exists()
