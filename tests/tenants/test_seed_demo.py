from django.contrib.auth import get_user_model
from django.core.management import call_command

from apps.accounts.models import Group
from apps.clusters.models import Node
from apps.storage.models import StorageConfig
from apps.tenants.models import Membership, Tenant
from apps.virtualclusters.capacity import guaranteed_leaf_cells
from apps.virtualclusters.models import VirtualCluster


def counts():
    return (
        Tenant.objects.count(),
        get_user_model().objects.count(),
        Group.objects.count(),
        VirtualCluster.objects.count(),
        StorageConfig.objects.count(),
        Node.objects.count(),
        Membership.objects.count(),
    )


def test_seed_demo_builds_two_teams_on_one_cluster_and_is_idempotent(db, tmp_path, settings):
    settings.PAI_DATA_DIR = tmp_path
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    first = counts()
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    assert counts() == first

    assert set(Tenant.objects.values_list("name", flat=True)) == {"Team A", "Team B"}
    assert Node.objects.filter(gpu_capacity=8).count() == 4
    assert Node.objects.filter(gpu_capacity=0).count() == 2
    # Both teams hold GPU and CPU cells, and together they use the whole cluster.
    a, b = VirtualCluster.objects.get(name="team_a"), VirtualCluster.objects.get(name="team_b")
    assert guaranteed_leaf_cells(a) == {"A100": 16, "CPU": 8}
    assert guaranteed_leaf_cells(b) == {"A100": 16, "CPU": 8}
    alice = get_user_model().objects.get(username="alice")
    assert alice.check_password("pai-alice")
    assert Membership.objects.get(user=alice).role == "admin"
    assert VirtualCluster.objects.usable_by(get_user_model().objects.get(username="dave")).get().name == "team_b"
    assert (tmp_path / "storage" / "team-a").is_dir()
    # Someone of the platform rotation is on call now, so onboarding e-mails can name them.
    from apps.oncall.services import current_dris

    assert [u.username for u in current_dris()] in (["admin"], ["erin"])
