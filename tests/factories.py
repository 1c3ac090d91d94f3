"""factory_boy factories shared by every app's tests."""

import factory
from django.contrib.auth import get_user_model

from apps.accounts.models import Group
from apps.clusters.models import CellType, Cluster, Node, PhysicalCell
from apps.storage.models import StorageConfig, StorageGrant, StorageServer
from apps.tenants.models import Membership, Tenant
from apps.virtualclusters.models import VirtualCluster, VirtualClusterCell, VirtualClusterGrant

PASSWORD = "correct-horse-battery-staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    contact_email = factory.LazyAttribute(lambda o: f"{o.slug}-admins@example.com")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.MEMBER


class GroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Group
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"group{n}")
    tenant = factory.SubFactory(TenantFactory)


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"cluster{n}")


class CellTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CellType

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"CELL{n}")


class PhysicalCellFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PhysicalCell

    cluster = factory.SubFactory(ClusterFactory)
    address = factory.Sequence(lambda n: f"cell-{n}")


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"node-{n}")


class VirtualClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = VirtualCluster

    tenant = factory.SubFactory(TenantFactory)
    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"vc{n}")


class VirtualClusterCellFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = VirtualClusterCell

    virtual_cluster = factory.SubFactory(VirtualClusterFactory)
    count = 1


class VirtualClusterGrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = VirtualClusterGrant

    virtual_cluster = factory.SubFactory(VirtualClusterFactory)
    group = factory.SubFactory(GroupFactory)


class StorageServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StorageServer

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"server-{n}")
    kind = "nfs"
    address = "10.0.0.1"
    root_path = "/export"


class StorageConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StorageConfig

    tenant = factory.SubFactory(TenantFactory)
    server = factory.SubFactory(StorageServerFactory, tenant=factory.SelfAttribute("..tenant"))
    name = factory.Sequence(lambda n: f"storage-{n}")
    mount_path = factory.LazyAttribute(lambda o: f"/mnt/{o.name}")


class StorageGrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StorageGrant

    storage = factory.SubFactory(StorageConfigFactory)
    group = factory.SubFactory(GroupFactory)
