"""pai-native cluster inventory: clusters, their cell types, physical cells and nodes.

Every signed-in user may read the inventory (it says what the farm is, nothing of any
team); it changes through the admin and the worker. A cluster's `connection` (where its
kubeconfig lives) is never returned.
"""

from django.shortcuts import get_object_or_404
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter

from apps.clusters.choices import BackendKind, ClusterClass
from apps.clusters.models import CellType, Cluster, Node, PhysicalCell

from .serializers import CellTypeSerializer, ClusterSerializer, NodeSerializer, PhysicalCellSerializer

CLUSTER_EXAMPLE = OpenApiExample("Cluster", response_only=True, value={
    "name": "local", "cluster_class": "production", "backend": "local", "description": "",
    "created_at": "2026-12-01T09:00:00Z"})
CELL_TYPE_EXAMPLE = OpenApiExample("Cell type", response_only=True, value={
    "name": "A100-NODE", "child": "A100-SWITCH", "child_count": 4, "is_node_level": True, "gpu": 1, "cpu": 1.0,
    "memory_mb": 1024, "device_resource": "nvidia.com/gpu"})
PHYSICAL_CELL_EXAMPLE = OpenApiExample("Physical cell", response_only=True, value={
    "address": "gpu-node-1", "cell_type": "A100-NODE", "parent": "rack-1", "pinned_id": ""})
NODE_EXAMPLE = OpenApiExample("Node", response_only=True, value={
    "name": "gpu-node-1", "ip": "10.0.0.11", "ready": True, "schedulable": True, "gpu_capacity": 8,
    "cpu_capacity": 64.0, "memory_mb_capacity": 524288, "labels": {"pai.sku": "A100"},
    "updated_at": "2026-12-02T12:00:00Z"})

CLUSTER_NAME = OpenApiParameter("cluster_name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Cluster name")


class ClusterFilter(filters.FilterSet):
    cluster_class = filters.ChoiceFilter(choices=ClusterClass.choices)
    backend = filters.ChoiceFilter(choices=BackendKind.choices)
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Cluster
        fields = ["cluster_class", "backend", "name"]


class CellTypeFilter(filters.FilterSet):
    is_node_level = filters.BooleanFilter()
    leaf = filters.BooleanFilter(field_name="child", lookup_expr="isnull", label="Only SKUs (leaf cell types)")

    class Meta:
        model = CellType
        fields = ["is_node_level", "leaf"]


class PhysicalCellFilter(filters.FilterSet):
    cell_type = filters.CharFilter(field_name="cell_type__name")
    parent = filters.CharFilter(field_name="parent__address")

    class Meta:
        model = PhysicalCell
        fields = ["cell_type", "parent"]


class NodeFilter(filters.FilterSet):
    ready = filters.BooleanFilter()
    schedulable = filters.BooleanFilter()
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Node
        fields = ["ready", "schedulable", "name"]


class InventoryViewSet(viewsets.ReadOnlyModelViewSet):
    filter_backends = [filters.DjangoFilterBackend, OrderingFilter]


@extend_schema_view(
    list=extend_schema(tags=["clusters"], summary="Clusters.", examples=[CLUSTER_EXAMPLE]),
    retrieve=extend_schema(tags=["clusters"], summary="A cluster, by name.", examples=[CLUSTER_EXAMPLE]),
)
class ClusterViewSet(InventoryViewSet):
    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
    filterset_class = ClusterFilter
    ordering_fields = ["name", "created_at"]
    ordering = ["name"]


class ClusterPartViewSet(InventoryViewSet):
    """The rows of one cluster, named in the path; an unknown cluster answers 404."""

    model = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            # drf-spectacular inspects the view without a cluster in the path.
            return self.model.objects.none()
        cluster = get_object_or_404(Cluster, name=self.kwargs["cluster_name"])
        return self.model.objects.filter(cluster=cluster)


@extend_schema_view(
    list=extend_schema(tags=["clusters"], summary="A cluster's cell types (leaf types are SKUs).",
                       parameters=[CLUSTER_NAME], examples=[CELL_TYPE_EXAMPLE]),
    retrieve=extend_schema(tags=["clusters"], summary="A cell type.", parameters=[CLUSTER_NAME], examples=[CELL_TYPE_EXAMPLE]),
)
class CellTypeViewSet(ClusterPartViewSet):
    model = CellType
    serializer_class = CellTypeSerializer
    lookup_field = "name"
    filterset_class = CellTypeFilter
    ordering_fields = ["name", "gpu"]
    ordering = ["name"]

    def get_queryset(self):
        return super().get_queryset().select_related("child")


@extend_schema_view(
    list=extend_schema(tags=["clusters"], summary="A cluster's physical cells (racks, nodes...).",
                       parameters=[CLUSTER_NAME], examples=[PHYSICAL_CELL_EXAMPLE]),
    retrieve=extend_schema(tags=["clusters"], summary="A physical cell, by address.", parameters=[CLUSTER_NAME], examples=[PHYSICAL_CELL_EXAMPLE]),
)
class PhysicalCellViewSet(ClusterPartViewSet):
    model = PhysicalCell
    serializer_class = PhysicalCellSerializer
    lookup_field = "address"
    lookup_value_regex = r"[^/]+"
    filterset_class = PhysicalCellFilter
    ordering_fields = ["address"]
    ordering = ["address"]

    def get_queryset(self):
        return super().get_queryset().select_related("cell_type", "parent")


@extend_schema_view(
    list=extend_schema(tags=["clusters"], summary="A cluster's nodes, with health and capacity.",
                       parameters=[CLUSTER_NAME], examples=[NODE_EXAMPLE]),
    retrieve=extend_schema(tags=["clusters"], summary="A node.", parameters=[CLUSTER_NAME], examples=[NODE_EXAMPLE]),
)
class NodeViewSet(ClusterPartViewSet):
    model = Node
    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    filterset_class = NodeFilter
    ordering_fields = ["name", "gpu_capacity", "updated_at"]
    ordering = ["name"]
