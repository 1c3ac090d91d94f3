"""Monitoring in the Django admin: the abnormal jobs, with the stop action of the jobs admin."""

from django.contrib import admin
from django.utils import timezone

from apps.jobs.admin import JobAdmin

from .abnormal import abnormal_job_queryset, describe
from .models import AbnormalRunningJob


@admin.register(AbnormalRunningJob)
class AbnormalJobAdmin(JobAdmin):
    """Running jobs over PAI_ABNORMAL_JOB_DAYS days, or below PAI_ABNORMAL_GPU_PERCENT % GPU for
    PAI_ABNORMAL_GPU_MINUTES minutes, among those the admin may stop."""

    list_display = ["name", "owner", "virtual_cluster", "total_gpu", "launched_at", "gpu_percent", "why"]
    list_filter = ["virtual_cluster", "priority_class"]
    list_select_related = ["owner", "virtual_cluster", "tenant", "gpu_use"]
    date_hierarchy = None
    ordering = ["launched_at"]

    def get_queryset(self, request):
        ids = abnormal_job_queryset(request.user).values("pk")
        return (
            AbnormalRunningJob.objects.filter(pk__in=ids)
            .select_related("owner", "virtual_cluster", "tenant", "gpu_use")
        )

    @admin.display(description="GPU %")
    def gpu_percent(self, obj):
        found = describe(obj, timezone.now())
        return "-" if found.gpu_percent is None else f"{found.gpu_percent:.1f} ({found.gpu_source})"

    @admin.display(description="why abnormal")
    def why(self, obj):
        return "; ".join(describe(obj, timezone.now()).reasons)
