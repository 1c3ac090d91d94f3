"""What the worker benchmarks share: Django on the benchmark's database, a cluster of
8-GPU nodes with its Node rows, a team that may use all of it, and a job document."""

import os


def setup_django(url, data_dir):
    os.environ["DATABASE_URL"] = url
    os.environ["DEBUG"] = "0"
    os.environ["PAI_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_cluster(name, nodes, backend="local", gpus_per_node=8):
    from apps.clusters.models import CellType, Cluster, Node, PhysicalCell

    cluster = Cluster.objects.create(name=name, backend=backend)
    gpu = CellType.objects.create(cluster=cluster, name="A100", gpu=1, cpu=8, memory_mb=65536)
    node_type = CellType.objects.create(cluster=cluster, name="A100-NODE", child=gpu, child_count=gpus_per_node,
                                        is_node_level=True)
    PhysicalCell.objects.bulk_create(
        [PhysicalCell(cluster=cluster, cell_type=node_type, address=f"{name}-node-{i:04d}") for i in range(nodes)]
    )
    Node.objects.bulk_create(
        [Node(cluster=cluster, name=f"{name}-node-{i:04d}", ip="127.0.0.1", gpu_capacity=gpus_per_node, cpu_capacity=64,
              memory_mb_capacity=524288) for i in range(nodes)]
    )
    return cluster, node_type


def build_team(cluster, node_type, nodes):
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Group
    from apps.tenants.models import Membership, Tenant
    from apps.virtualclusters.services import create_virtual_cluster, grant_virtual_cluster

    tenant = Tenant.objects.create(slug=f"team-{cluster.name}", name=f"Team {cluster.name}")
    user = get_user_model().objects.create_user(f"user-{cluster.name}", "u@example.com", "x")
    Membership.objects.create(tenant=tenant, user=user)
    vc = create_virtual_cluster(None, tenant=tenant, cluster=cluster, name=f"vc_{cluster.name}", cells=[(node_type, nodes)])
    group, _ = Group.objects.get_or_create(name=f"g_{cluster.name}", defaults={"tenant": tenant})
    grant_virtual_cluster(None, vc, group)
    user.groups.add(group)
    return user, vc


def job_text(name, vc, pods, command):
    return f"""protocolVersion: 2
name: {name}
type: job
prerequisites: [{{name: image, type: dockerimage, uri: ubuntu:22.04}}]
defaults: {{virtualCluster: {vc}}}
taskRoles:
  main:
    instances: {pods}
    dockerImage: image
    resourcePerInstance: {{gpu: 1, cpu: 1, memoryMB: 1024}}
    commands: ["{command}"]
"""
