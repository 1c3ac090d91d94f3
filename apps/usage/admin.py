"""Usage in the admin: the ledger (read-only), a grouped report with CSV export, and budgets.

Team admins see their tenants' usage and their VCs' budgets; platform admins see all and
set the budgets (audited).
"""

from django.contrib import admin
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from apps.tenants.admin_mixins import TenantRoleMixin, TenantScopedAdmin

from .ledger import vc_gpu_hours
from .models import GpuHourBudget, UsageRecord
from .reports import DIMENSIONS, ReportError, parse_request, report_csv, usage_report


@admin.register(UsageRecord)
class UsageRecordAdmin(TenantRoleMixin, admin.ModelAdmin):
    tenant_admin_can = ("view",)
    list_display = ["month", "tenant", "vc_name", "username", "job_name", "attempt_index", "sku", "gpus", "gpu_hours",
                    "cpu_hours", "ended_at"]
    list_filter = ["month", "sku", "priority_class"]
    search_fields = ["username", "job_name", "vc_name"]
    list_select_related = ["tenant"]
    change_list_template = "admin/usage/usagerecord/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).manageable_by(request.user)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        report = self.admin_site.admin_view(self.report_view)
        return [path("report/", report, name="usage_usagerecord_report"), *super().get_urls()]

    def report_view(self, request):
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        error, rows = "", []
        try:
            report = parse_request(request.GET)
        except ReportError as exc:
            error, report = str(exc), parse_request({})
        else:
            rows = usage_report(request.user, report)
            if request.GET.get("output") == "csv":
                response = HttpResponse(report_csv(report, rows), content_type="text/csv")
                response["Content-Disposition"] = 'attachment; filename="pai-usage.csv"'
                return response
        query = request.GET.copy()
        query["output"] = "csv"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Usage report",
            "error": error,
            "report": report,
            "dimensions": list(DIMENSIONS),
            "rows": [[row.get(d) for d in report.group_by] + [row["gpu_hours"], row["cpu_hours"]] for row in rows],
            "total": [round(sum(r["gpu_hours"] for r in rows), 3), round(sum(r["cpu_hours"] for r in rows), 3)],
            "csv_url": f"{reverse('admin:usage_usagerecord_report')}?{query.urlencode()}",
            "params": request.GET,
        }
        return TemplateResponse(request, "admin/usage/report.html", context)


@admin.register(GpuHourBudget)
class GpuHourBudgetAdmin(TenantScopedAdmin):
    tenant_admin_can = ("view",)
    list_display = ["virtual_cluster", "gpu_hours_per_month", "used_this_month", "note", "updated_at"]
    list_select_related = ["virtual_cluster"]
    fields = ["virtual_cluster", "gpu_hours_per_month", "note"]

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        # One ledger query for the page, not one per row.
        self._used = vc_gpu_hours([b.virtual_cluster_id for b in changelist.result_list], timezone.now())
        return changelist

    @admin.display(description="used this month (GPU-hours)")
    def used_this_month(self, obj):
        used = getattr(self, "_used", {}).get(obj.virtual_cluster_id)
        return "" if used is None else f"{used[0]:,.1f}"
