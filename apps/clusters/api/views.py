"""pai-native cluster inventory: clusters, their cell types, physical cells and nodes.

Every signed-in user may read the inventory (it says what the farm is, nothing of any
team); platform admins change clusters, cell types and physical cells. Nodes are
read-only: the worker keeps them as the backend reports them. A cluster's `connection`
(where its kubeconfig lives) is never returned. Deleting a row still in use (a cluster
with VCs, a cell type of a quota) answers 409.
"""

from django.shortcuts import get_object_or_404
from django.utils.functional import cached_property
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter
from rest_framework.permissions import IsAuthenticated

from apps.clusters.choices import BackendKind, ClusterClass
from apps.clusters.models import CellType, Cluster, Node, PhysicalCell
from apps.clusters.services import delete_inventory_row, save_inventory_row
from pai.api.permissions import ReadOnlyOrPlatformAdmin
from pai.api.views import ServiceErrorsMixin

from .serializers import CellTypeSerializer, ClusterSerializer, NodeSerializer, PhysicalCellSerializer

CLUSTER_EXAMPLE = OpenApiExample("Cluster", response_only=True, value={
    "name": "local", "cluster_class": "production", "backend": "local", "description": "",
    "api_qps": 200.0, "api_burst": 400, "created_at": "2026-12-01T09:00:00Z", "api_available": True, "api_unavailable_since": None, "api_error": ""})
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
READ_ONLY = {"created_at", "updated_at", "api_available", "api_unavailable_since", "api_error"}


def inventory_schema(plural, singular, noun, example, *, in_cluster=True, writable=True):
    """The schema of an inventory viewset: every action tagged, described and with an example."""
    params = [CLUSTER_NAME] if in_cluster else []
    actions = {
        "list": extend_schema(tags=["clusters"], summary=plural, parameters=params, examples=[example]),
        "retrieve": extend_schema(tags=["clusters"], summary=singular, parameters=params, examples=[example]),
    }
    if writable:
        request = OpenApiExample("Row", value={k: v for k, v in example.value.items() if k not in READ_ONLY},
                                 request_only=True)
        for action, verb in (("create", "Create"), ("update", "Replace"), ("partial_update", "Change")):
            actions[action] = extend_schema(tags=["clusters"], summary=f"{verb} {noun} (platform admins).",
                                            parameters=params, examples=[request, example])
        actions["destroy"] = extend_schema(tags=["clusters"], summary=f"Delete {noun} (platform admins); 409 while "
                                           "in use.", parameters=params)
    return extend_schema_view(**actions)


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


class InventoryViewSet(ServiceErrorsMixin, viewsets.ModelViewSet):
    """Reads for everyone signed in; writes for platform admins, through the clusters' services."""

    permission_classes = [IsAuthenticated, ReadOnlyOrPlatformAdmin]
    filter_backends = [filters.DjangoFilterBackend, OrderingFilter]
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def row_defaults(self):
        return {}

    def perform_create(self, serializer):
        row = self.get_queryset().model(**self.row_defaults())
        serializer.instance = save_inventory_row(self.request.user, row, serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = save_inventory_row(self.request.user, serializer.instance, serializer.validated_data)

    def perform_destroy(self, instance):
        delete_inventory_row(self.request.user, instance)


@inventory_schema("Clusters.", "A cluster, by name.", "a cluster", CLUSTER_EXAMPLE, in_cluster=False)
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

    @cached_property
    def cluster(self):
        return get_object_or_404(Cluster, name=self.kwargs["cluster_name"])

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            # drf-spectacular inspects the view without a cluster in the path.
            return self.model.objects.none()
        return self.model.objects.filter(cluster=self.cluster)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["cluster"] = self.cluster
        return context

    def row_defaults(self):
        return {"cluster": self.cluster}


@inventory_schema("A cluster's cell types (leaf types are SKUs).", "A cell type.", "a cell type", CELL_TYPE_EXAMPLE)
class CellTypeViewSet(ClusterPartViewSet):
    model = CellType
    serializer_class = CellTypeSerializer
    lookup_field = "name"
    filterset_class = CellTypeFilter
    ordering_fields = ["name", "gpu"]
    ordering = ["name"]

    def get_queryset(self):
        return super().get_queryset().select_related("child")


@inventory_schema("A cluster's physical cells (racks, nodes...).", "A physical cell, by address.",
                  "a physical cell", PHYSICAL_CELL_EXAMPLE)
class PhysicalCellViewSet(ClusterPartViewSet):
    model = PhysicalCell
    serializer_class = PhysicalCellSerializer
    lookup_field = "address"
    # A node's name, or a host's device range (h1/4-7), or a cell inside a node (n1/2-3).
    lookup_value_regex = r"[^/]+/?[0-9-]*"
    filterset_class = PhysicalCellFilter
    ordering_fields = ["address"]
    ordering = ["address"]

    def get_queryset(self):
        return super().get_queryset().select_related("cell_type", "parent")


@inventory_schema("A cluster's nodes, with health and capacity (kept by the worker; read-only).", "A node.",
                  "a node", NODE_EXAMPLE, writable=False)
class NodeViewSet(ClusterPartViewSet):
    http_method_names = ["get", "head", "options"]
    model = Node
    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    filterset_class = NodeFilter
    ordering_fields = ["name", "gpu_capacity", "updated_at"]
    ordering = ["name"]
