"""Load the demo: two teams sharing one local cluster. Safe to run again: it adds only what is missing."""

from datetime import date, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts.models import Group
from apps.accounts.roles import ADMIN_GROUP
from apps.clusters.models import CellType, Cluster, Node, PhysicalCell
from apps.storage.models import StorageConfig, StorageGrant, StorageServer
from apps.tenants.models import Membership, Tenant
from apps.virtualclusters.models import VirtualCluster
from apps.virtualclusters.services import create_virtual_cluster, grant_virtual_cluster

GPU_NODES = [f"gpu-node-{i}" for i in range(1, 5)]
CPU_NODES = ["cpu-node-1", "cpu-node-2"]

# username: (password, tenant slug or None, role or "platform")
DEMO_USERS = {
    "admin": ("pai-admin", None, "platform"),
    "alice": ("pai-alice", "team-a", Membership.Role.ADMIN),
    "carol": ("pai-carol", "team-a", Membership.Role.MEMBER),
    "bob": ("pai-bob", "team-b", Membership.Role.ADMIN),
    "dave": ("pai-dave", "team-b", Membership.Role.MEMBER),
    "erin": ("pai-erin", None, "platform"),
}
# The platform team's on-call rotation: weekly shifts, handed over on Mondays at 10:00.
DEMO_ROTATION = ("platform", ["admin", "erin"])


class Command(BaseCommand):
    help = "Create the demo teams, cluster, virtual clusters, storage and users (idempotent)."

    def handle(self, *args, **options):
        with transaction.atomic():
            cluster = self.cluster()
            tenants = self.tenants()
            self.virtual_clusters(cluster, tenants)
            self.storage(tenants)
            self.users(tenants)
            self.rotation()
        self.stdout.write(self.style.SUCCESS("Demo data ready. Logins (username / password):"))
        for username, (password, slug, role) in DEMO_USERS.items():
            what = "platform admin and DRI" if role == "platform" else f"{role} of {tenants[slug].name}"
            self.stdout.write(f"  {username:6} / {password:10}  {what}")

    def cluster(self):
        cluster, _ = Cluster.objects.get_or_create(
            name="local",
            defaults={
                "cluster_class": "production",
                "backend": "local",
                "description": "This machine: 4 virtual nodes × 8 GPUs in one rack, and 2 CPU-only nodes.",
            },
        )
        a100, _ = CellType.objects.get_or_create(
            cluster=cluster, name="A100", defaults={"gpu": 1, "cpu": 8, "memory_mb": 65536}
        )
        switch, _ = CellType.objects.get_or_create(
            cluster=cluster, name="A100-SWITCH", defaults={"child": a100, "child_count": 2}
        )
        node, _ = CellType.objects.get_or_create(
            cluster=cluster, name="A100-NODE", defaults={"child": switch, "child_count": 4, "is_node_level": True}
        )
        rack, _ = CellType.objects.get_or_create(cluster=cluster, name="A100-RACK", defaults={"child": node, "child_count": 4})
        cpu, _ = CellType.objects.get_or_create(
            cluster=cluster, name="CPU", defaults={"gpu": 0, "cpu": 4, "memory_mb": 16384, "device_resource": ""}
        )
        cpu_node, _ = CellType.objects.get_or_create(
            cluster=cluster, name="CPU-NODE", defaults={"child": cpu, "child_count": 8, "is_node_level": True}
        )
        rack_cell, _ = PhysicalCell.objects.get_or_create(cluster=cluster, address="rack-1", defaults={"cell_type": rack})
        for name in GPU_NODES:
            PhysicalCell.objects.get_or_create(
                cluster=cluster, address=name, defaults={"cell_type": node, "parent": rack_cell}
            )
            Node.objects.get_or_create(
                cluster=cluster,
                name=name,
                defaults={"ip": "127.0.0.1", "gpu_capacity": 8, "cpu_capacity": 64, "memory_mb_capacity": 524288},
            )
        for name in CPU_NODES:
            PhysicalCell.objects.get_or_create(cluster=cluster, address=name, defaults={"cell_type": cpu_node})
            Node.objects.get_or_create(
                cluster=cluster, name=name, defaults={"ip": "127.0.0.1", "cpu_capacity": 32, "memory_mb_capacity": 131072}
            )
        return cluster

    def tenants(self):
        tenants = {}
        for slug, name, project in (("team-a", "Team A", "project A"), ("team-b", "Team B", "project B")):
            tenants[slug], _ = Tenant.objects.get_or_create(
                slug=slug,
                defaults={
                    "name": name,
                    "description": f"The team working on {project}.",
                    "contact_email": f"{slug}-admins@example.com",
                },
            )
        return tenants

    def virtual_clusters(self, cluster, tenants):
        cell = {ct.name: ct for ct in CellType.objects.filter(cluster=cluster)}
        quotas = {
            "team_a": ("team-a", [(cell["A100-NODE"], 2), (cell["CPU-NODE"], 1)]),
            "team_b": ("team-b", [(cell["A100-NODE"], 1), (cell["A100-SWITCH"], 4), (cell["CPU-NODE"], 1)]),
        }
        for name, (slug, cells) in quotas.items():
            tenant = tenants[slug]
            vc = VirtualCluster.objects.filter(name=name).first()
            if vc is None:
                vc = create_virtual_cluster(
                    None, tenant=tenant, cluster=cluster, name=name, cells=cells,
                    description=f"{tenant.name}'s guaranteed GPUs and CPUs.",
                )
            # In OIDC mode the VC brings no group: the demo still wants one per team.
            group, _ = Group.objects.get_or_create(name=name, defaults={"tenant": tenant})
            grant_virtual_cluster(None, vc, group)

    def storage(self, tenants):
        root = settings.PAI_DATA_DIR / "storage"
        for slug, tenant in tenants.items():
            short = slug.split("-")[1]
            server, _ = StorageServer.objects.get_or_create(
                name=f"{slug}-local",
                defaults={"tenant": tenant, "kind": "hostPath", "root_path": str(root / slug)},
            )
            (root / slug).mkdir(parents=True, exist_ok=True)
            group = Group.objects.get(name=f"team_{short}")
            for name, mount_path, per_user in ((f"{slug}-data", "/mnt/data", False), (f"{slug}-home", "/mnt/home", True)):
                config, _ = StorageConfig.objects.get_or_create(
                    name=name,
                    defaults={
                        "tenant": tenant,
                        "server": server,
                        "sub_path": name.rsplit("-", 1)[1],
                        "mount_path": mount_path,
                        "per_user_sub_path": per_user,
                    },
                )
                StorageGrant.objects.get_or_create(storage=config, group=group, defaults={"is_default": True})

    def rotation(self):
        from apps.oncall.models import Rotation, RotationMember

        name, members = DEMO_ROTATION
        rotation, created = Rotation.objects.get_or_create(
            name=name,
            defaults={
                "description": "The platform team's DRIs for the local cluster.",
                "start_date": date.today() - timedelta(days=14),
                "timezone": "UTC",
            },
        )
        if created:
            User = get_user_model()
            for position, username in enumerate(members):
                RotationMember.objects.create(rotation=rotation, user=User.objects.get(username=username), position=position)

    def users(self, tenants):
        User = get_user_model()
        admin_group = Group.objects.get(name=ADMIN_GROUP)
        for username, (password, slug, role) in DEMO_USERS.items():
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User.objects.create_user(username, f"{username}@example.com", password)
            if role == "platform":
                user.is_staff = True
                user.save(update_fields=["is_staff"])
                user.groups.add(admin_group)
                continue
            tenant = tenants[slug]
            Membership.objects.get_or_create(tenant=tenant, user=user, defaults={"role": role})
            user.groups.add(Group.objects.get(name=f"team_{slug.split('-')[1]}"))
