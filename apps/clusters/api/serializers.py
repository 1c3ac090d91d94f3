from rest_framework import serializers

from apps.clusters.models import CellType, Cluster, Node, PhysicalCell


class ClusterSerializer(serializers.ModelSerializer):
    cluster_class = serializers.CharField(read_only=True, help_text="production or non-production")

    class Meta:
        model = Cluster
        fields = ["name", "cluster_class", "backend", "description", "created_at"]


class CellTypeSerializer(serializers.ModelSerializer):
    child = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = CellType
        fields = ["name", "child", "child_count", "is_node_level", "gpu", "cpu", "memory_mb", "device_resource"]


class PhysicalCellSerializer(serializers.ModelSerializer):
    cell_type = serializers.SlugRelatedField(slug_field="name", read_only=True)
    parent = serializers.SlugRelatedField(slug_field="address", read_only=True)

    class Meta:
        model = PhysicalCell
        fields = ["address", "cell_type", "parent", "pinned_id"]


class NodeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Node
        fields = [
            "name", "ip", "ready", "schedulable", "gpu_capacity", "cpu_capacity", "memory_mb_capacity", "labels",
            "updated_at",
        ]
