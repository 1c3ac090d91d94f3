from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path

from apps.accounts.roles import is_platform_admin
from apps.accounts.sharing_admin import SharingAdminMixin
from apps.clusters.models import CellType
from apps.tenants.admin_mixins import TenantScopedAdmin, TenantScopedInline

from . import services
from .forms import CellsFormSet, VirtualClusterForm
from .capacity import forget_topology
from .models import PinnedCell, VirtualCluster, VirtualClusterCell, VirtualClusterGrant
from .quotas import cluster_capacity


def describe_cell_type(cell_type):
    """A cell type in words: what one cell holds down to its devices, for those who cannot open its page."""
    parts, node = [], cell_type
    while node.child_id is not None:
        child = node.child
        parts.append(f"{node.child_count} × {child.name}")
        node = child
    leaf = node
    per_leaf = ", ".join(p for p in (f"{leaf.gpu} GPU" if leaf.gpu else "", f"{leaf.cpu:g} CPU", f"{leaf.memory_mb // 1024} GiB") if p)
    inside = f" = {' of '.join(parts)}" if parts else ""
    return f"{cell_type.name}{inside} ({leaf.name}: {per_leaf} each)"


class VirtualClusterCellInline(TenantScopedInline, admin.TabularInline):
    model = VirtualClusterCell
    formset = CellsFormSet
    extra = 1
    tenant_admin_can = ("view",)

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        # Only platform admins edit quotas; for others the inline is read-only and there is
        # no new quota to check.
        formset.validate_quota = is_platform_admin(request.user)
        return formset

    def get_fields(self, request, obj=None):
        if is_platform_admin(request.user):
            return super().get_fields(request, obj)
        # Cell types are the platform's: a team admin reads what one holds here, not behind a link to a page refused to them.
        return ["cell_type_summary", "chain_name", "count"]

    def get_readonly_fields(self, request, obj=None):
        return () if is_platform_admin(request.user) else ("cell_type_summary", "chain_name", "count")

    @admin.display(description="chain")
    def chain_name(self, obj):
        return obj.chain.name if obj.chain_id else "any"

    @admin.display(description="cell type")
    def cell_type_summary(self, obj):
        return describe_cell_type(obj.cell_type)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "cell_type":
            kwargs["queryset"] = CellType.objects.select_related("cluster").order_by("cluster__name", "name")
        elif db_field.name == "chain":
            # A chain is named by the cell type of its top-level physical cells.
            tops = CellType.objects.filter(physical_cells__parent__isnull=True).values("pk")
            kwargs["queryset"] = CellType.objects.filter(pk__in=tops).select_related("cluster").order_by("cluster__name", "name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class VirtualClusterGrantInline(TenantScopedInline, admin.TabularInline):
    model = VirtualClusterGrant
    extra = 0
    fields = ("group", "created_at")
    readonly_fields = ("created_at",)


@admin.register(VirtualCluster)
class VirtualClusterAdmin(SharingAdminMixin, TenantScopedAdmin):
    """Quotas are the platform's to set; a tenant admin sees them and manages who may use them."""

    form = VirtualClusterForm
    # The sharing mixin's form, with the cluster's capacity table above it.
    change_form_template = "admin/virtualclusters/virtualcluster/change_form.html"
    tenant_admin_can = ("view", "change")
    list_display = ("name", "tenant", "cluster", "quota", "cohort")
    list_filter = ("cluster", "tenant", "cohort")
    search_fields = ("name", "description")
    inlines = [VirtualClusterCellInline, VirtualClusterGrantInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tenant", "cluster").prefetch_related(
            "cells__cell_type", "cells__chain"
        )

    @admin.display(description="guaranteed cells")
    def quota(self, obj):
        return ", ".join(str(cell) for cell in obj.cells.all())

    @admin.display(description="pinned cells")
    def pinned_display(self, obj):
        return ", ".join(str(p.physical_cell) for p in obj.pinned_cells.select_related("physical_cell__cell_type"))

    def get_readonly_fields(self, request, obj=None):
        if is_platform_admin(request.user):
            return ()
        return [f.name for f in VirtualCluster._meta.fields if f.name not in ("id", "cluster")] + [
            "cluster_summary", "pinned_display",
        ]

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        if is_platform_admin(request.user):
            return fields
        # The cluster's page is the platform's: its name and size are shown here instead of a link.
        return ["cluster_summary" if f == "cluster" else f for f in fields]

    @admin.display(description="cluster")
    def cluster_summary(self, obj):
        nodes = obj.cluster.nodes.count()
        return f"{obj.cluster.name} ({obj.cluster.get_cluster_class_display()}, {nodes} node{'s' if nodes != 1 else ''})"

    def get_form(self, request, obj=None, change=False, **kwargs):
        if not is_platform_admin(request.user):
            kwargs["form"] = forms.ModelForm
            kwargs["fields"] = []
        return super().get_form(request, obj, change=change, **kwargs)

    def get_urls(self):
        return [
            path("capacity/", self.admin_site.admin_view(self.capacity_view), name="virtualclusters_virtualcluster_capacity"),
        ] + super().get_urls()

    def capacity_view(self, request):
        """Every cluster the viewer has a VC on (platform admins: every cluster), as quotas see it."""
        from apps.clusters.models import Cluster

        if not self.has_view_permission(request):
            raise PermissionDenied
        clusters = Cluster.objects.order_by("name")
        if not is_platform_admin(request.user):
            clusters = clusters.filter(pk__in=self.get_queryset(request).values("cluster_id"))
        return TemplateResponse(request, "admin/virtualclusters/capacity.html", {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Capacity",
            "clusters": [cluster_capacity(cluster, request.user) for cluster in clusters],
        })

    def change_view(self, request, object_id, form_url="", extra_context=None):
        vc = self.get_object(request, object_id)
        extra_context = extra_context or {}
        if vc is not None:
            extra_context["capacity"] = cluster_capacity(vc.cluster, request.user)
        return super().change_view(request, object_id, form_url, extra_context)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        vc = form.instance
        if isinstance(form, VirtualClusterForm):
            wanted = {c.pk for c in form.cleaned_data["pinned"]}
            vc.pinned_cells.exclude(physical_cell__in=wanted).delete()
            have = set(vc.pinned_cells.values_list("physical_cell_id", flat=True))
            PinnedCell.objects.bulk_create(
                [PinnedCell(virtual_cluster=vc, physical_cell_id=pk) for pk in sorted(wanted - have)]
            )
            forget_topology()  # bulk_create sends no post_save
        if not change:
            services.after_virtual_cluster_created(request.user, vc)


@admin.register(VirtualClusterGrant)
class VirtualClusterGrantAdmin(TenantScopedAdmin):
    tenant_admin_can = ("view", "add", "delete")
    list_display = ("virtual_cluster", "group", "created_at")
    list_filter = ("virtual_cluster",)
    search_fields = ("virtual_cluster__name", "group__name")
