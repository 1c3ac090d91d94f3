"""The cluster inventory's rows. Writes validate here (shape) and in the models' clean() (topology)."""

from rest_framework import serializers

from apps.clusters.models import CellType, Cluster, Node, PhysicalCell


class ClusterSerializer(serializers.ModelSerializer):
    connection = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=255,
        help_text="Kubernetes: 'in-cluster' or a kubeconfig secret/file name. Never returned.",
    )

    class Meta:
        model = Cluster
        fields = [
            "name", "cluster_class", "backend", "connection", "description", "api_qps", "api_burst",
            "prometheus_url", "gpu_utilization_query", "created_at", "api_available", "api_unavailable_since",
            "api_error",
        ]
        read_only_fields = ["created_at", "api_available", "api_unavailable_since", "api_error"]
        # Uniqueness is checked by the model's full_clean in the service, in the same transaction.
        extra_kwargs = {"name": {"validators": []}}


class _InClusterSlugField(serializers.SlugRelatedField):
    """A row of the cluster named in the URL, by its name or address."""

    def get_queryset(self):
        return self.queryset.filter(cluster=self.context["cluster"])


class CellTypeSerializer(serializers.ModelSerializer):
    child = _InClusterSlugField(slug_field="name", queryset=CellType.objects.all(), required=False, allow_null=True,
                                help_text="The cell type one level down; empty for a leaf (a SKU).")

    class Meta:
        model = CellType
        fields = ["name", "child", "child_count", "is_node_level", "gpu", "cpu", "memory_mb", "device_resource"]
        validators = []


class PhysicalCellSerializer(serializers.ModelSerializer):
    cell_type = _InClusterSlugField(slug_field="name", queryset=CellType.objects.all())
    parent = _InClusterSlugField(slug_field="address", queryset=PhysicalCell.objects.all(), required=False,
                                 allow_null=True)

    class Meta:
        model = PhysicalCell
        fields = ["address", "cell_type", "parent", "pinned_id"]
        validators = []


class NodeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Node
        fields = [
            "name", "ip", "ready", "schedulable", "gpu_capacity", "gpu_used_by_others", "cells_used_by_others",
            "cpu_capacity", "memory_mb_capacity", "labels", "updated_at",
        ]
        read_only_fields = ["gpu_used_by_others", "cells_used_by_others"]
