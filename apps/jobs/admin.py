"""Jobs in the Django admin: read-only records, scoped like the API, with a stop action.

Rows are scoped with `readable_by` (owner, the job's tenant admins, platform admins,
users it is shared with), the scope that may see a job's config, since the change page
shows it. Its shares are managed on guardian's object-permission pages.
"""

from django.contrib import admin, messages

from apps.accounts.sharing_admin import SharingAdminMixin

from . import services
from .choices import COMPLETED_STATES, ExecutionType
from .models import Job, JobAttempt, JobEvent


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class JobAttemptInline(_ReadOnlyInline):
    model = JobAttempt
    fields = ["index", "state", "sub_state", "launched_at", "completed_at", "exit_code", "exit_diagnostics"]
    readonly_fields = fields


class JobEventInline(_ReadOnlyInline):
    model = JobEvent
    fields = ["last_seen", "type", "reason", "message", "task_role", "task_index", "count"]
    readonly_fields = fields


@admin.register(Job)
class JobAdmin(SharingAdminMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "virtual_cluster", "state", "sub_state", "priority_class", "total_gpu",
                    "submitted_at"]
    list_filter = ["state", "priority_class", "virtual_cluster"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner", "virtual_cluster"]
    date_hierarchy = "submitted_at"
    inlines = [JobAttemptInline, JobEventInline]
    actions = ["stop_jobs"]
    exclude = ["spec", "launch"]

    def get_queryset(self, request):
        return Job.objects.readable_by(request.user).select_related("owner", "virtual_cluster", "tenant")

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Job._meta.fields if f.name not in self.exclude]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        # Jobs change only through services (the stop action); the change page is a view.
        return False

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    @admin.action(description="Stop selected jobs")
    def stop_jobs(self, request, queryset):
        stopped = 0
        # The rows include jobs shared read-only with the user; those are not theirs to stop.
        queryset = queryset.filter(pk__in=Job.objects.manageable_by(request.user).values("pk"))
        for job in queryset.exclude(state__in=COMPLETED_STATES).exclude(execution_type=ExecutionType.STOP):
            services.set_execution_type(request.user, job, ExecutionType.STOP)
            stopped += 1
        self.message_user(request, f"Stopped {stopped} job(s).", messages.SUCCESS)
