from django.contrib import admin
from django.db import models

from apps.tenants.admin_mixins import PlatformAdmin

from .models import CellType, Cluster, Node, PhysicalCell


class CellTypeInline(admin.TabularInline):
    model = CellType
    fk_name = "cluster"
    extra = 0
    fields = ("name", "child", "child_count", "is_node_level", "gpu", "cpu", "memory_mb", "device_resource")


@admin.register(Cluster)
class ClusterAdmin(PlatformAdmin):
    list_display = ("name", "cluster_class", "backend", "node_count", "api_status", "api_qps")
    fields = ("name", "cluster_class", "backend", "connection", "description", ("api_qps", "api_burst"),
              "prometheus_url", "gpu_utilization_query", "api_available", "api_unavailable_since", "api_error")
    list_filter = ("cluster_class", "backend", "api_available")
    search_fields = ("name",)
    readonly_fields = ("api_available", "api_unavailable_since", "api_error")
    inlines = [CellTypeInline]
    # A Prometheus inside the cluster is usually reached over plain HTTP.
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}

    @admin.display(description="API", ordering="api_available")
    def api_status(self, obj):
        if obj.api_available:
            return "available"
        since = obj.api_unavailable_since.strftime("%Y-%m-%d %H:%M:%S %Z") if obj.api_unavailable_since else "?"
        return f"cluster API unavailable since {since}"

    @admin.display(description="nodes")
    def node_count(self, obj):
        return obj.nodes.count()


@admin.register(CellType)
class CellTypeAdmin(PlatformAdmin):
    list_display = ("name", "cluster", "child", "child_count", "is_node_level", "gpu", "cpu", "memory_mb")
    list_filter = ("cluster", "is_node_level")
    search_fields = ("name",)


@admin.register(PhysicalCell)
class PhysicalCellAdmin(PlatformAdmin):
    list_display = ("address", "cell_type", "cluster", "parent", "pinned_id")
    list_filter = ("cluster", "cell_type")
    search_fields = ("address", "pinned_id")
    list_select_related = ("cell_type", "cluster", "parent")


@admin.register(Node)
class NodeAdmin(PlatformAdmin):
    list_display = ("name", "cluster", "ip", "ready", "schedulable", "gpu_capacity", "gpu_used_by_others",
                    "cells_used_by_others", "cpu_capacity", "updated_at")
    readonly_fields = ("gpu_used_by_others", "cells_used_by_others")
    list_filter = ("cluster", "ready", "schedulable")
    search_fields = ("name", "ip")
