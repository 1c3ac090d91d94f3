from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from apps.accounts.roles import is_platform_admin

from .admin_mixins import TenantScopedAdmin
from .forms import BulkOnboardForm, OnboardUserForm
from .models import Membership, Tenant
from .services import OnboardingError, bulk_onboard, onboard_user


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ("user", "role", "created_at")
    readonly_fields = ("user", "created_at")

    def has_add_permission(self, request, obj=None):
        # New members arrive through onboarding, which also e-mails them.
        return False


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_admin_can = ("view", "change")
    list_display = ("name", "slug", "contact_email", "job_retention_days", "member_count", "onboard_links")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]
    actions = ["onboard_action", "bulk_onboard_action"]
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "contact_email")}),
        ("Jobs", {"fields": ("job_retention_days",)}),
        ("Idle GPUs", {"fields": ("idle_gpu_threshold_percent", "idle_gpu_hours", "idle_gpu_action")}),
        (
            "Onboarding e-mail",
            {
                "fields": ("onboarding_email_subject", "onboarding_email_template"),
                "description": "Leave the text empty to send pai's default: how to submit and debug jobs, the "
                "user manual, retention, the idle-GPU rule, whom to contact and this week's DRI. A custom text "
                "is a Django template with user, tenant, public_url, manual_url, team_admins, dris, "
                "virtual_clusters and set_password_url.",
            },
        ),
    )

    def get_readonly_fields(self, request, obj=None):
        # A tenant admin edits policies, not the tenant's identity.
        return () if is_platform_admin(request.user) else ("name", "slug")

    def get_prepopulated_fields(self, request, obj=None):
        return self.prepopulated_fields if is_platform_admin(request.user) else {}

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(_member_count=Count("memberships"))

    @admin.display(description="members", ordering="_member_count")
    def member_count(self, obj):
        return obj._member_count

    @admin.display(description="onboarding")
    def onboard_links(self, obj):
        return format_html(
            '<a href="{}">Onboard a user</a> · <a href="{}">Bulk onboard (CSV)</a>',
            reverse("admin:tenants_tenant_onboard", args=[obj.pk]),
            reverse("admin:tenants_tenant_bulk_onboard", args=[obj.pk]),
        )

    def get_urls(self):
        return [
            path("<int:tenant_id>/onboard/", self.admin_site.admin_view(self.onboard_view), name="tenants_tenant_onboard"),
            path(
                "<int:tenant_id>/bulk-onboard/",
                self.admin_site.admin_view(self.bulk_onboard_view),
                name="tenants_tenant_bulk_onboard",
            ),
        ] + super().get_urls()

    def _managed_tenant(self, request, tenant_id):
        # 404 for tenants out of scope, so their existence does not leak.
        return get_object_or_404(Tenant.objects.manageable_by(request.user), pk=tenant_id)

    @admin.action(description="Onboard a user into the selected team")
    def onboard_action(self, request, queryset):
        return self._redirect_for_one(request, queryset, "admin:tenants_tenant_onboard")

    @admin.action(description="Bulk-onboard users from a CSV file into the selected team")
    def bulk_onboard_action(self, request, queryset):
        return self._redirect_for_one(request, queryset, "admin:tenants_tenant_bulk_onboard")

    def _redirect_for_one(self, request, queryset, url_name):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one team to onboard users into.", messages.ERROR)
            return None
        return redirect(url_name, queryset.get().pk)

    def onboard_view(self, request, tenant_id):
        tenant = self._managed_tenant(request, tenant_id)
        form = OnboardUserForm(request.POST or None, tenant=tenant)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                user = onboard_user(
                    request.user,
                    tenant,
                    username=data["username"],
                    email=data["email"],
                    groups=list(data["groups"]),
                    role=data["role"],
                    first_name=data["first_name"],
                    last_name=data["last_name"],
                )
            except OnboardingError as exc:
                for problem in exc.errors:
                    field, _, message = problem.partition(": ")
                    form.add_error(field if field in form.fields else None, message or problem)
            except PermissionDenied:
                raise
            else:
                self.message_user(request, f"Onboarded {user.username}; the welcome e-mail was sent to {user.email}.")
                return redirect("admin:tenants_tenant_change", tenant.pk)
        return self._render(request, tenant, form, "Onboard a user", problems=None)

    def bulk_onboard_view(self, request, tenant_id):
        tenant = self._managed_tenant(request, tenant_id)
        form = BulkOnboardForm(request.POST or None, request.FILES or None)
        problems = None
        if request.method == "POST" and form.is_valid():
            try:
                users = bulk_onboard(request.user, tenant, form.cleaned_data["csv_file"])
            except OnboardingError as exc:
                problems = exc.errors
                self.message_user(request, "Nobody was onboarded: fix the lines below and upload again.", messages.ERROR)
            else:
                self.message_user(request, f"Onboarded {len(users)} users: {', '.join(u.username for u in users)}.")
                return redirect("admin:tenants_tenant_change", tenant.pk)
        return self._render(request, tenant, form, "Bulk-onboard users from CSV", problems=problems)

    def _render(self, request, tenant, form, title, problems):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": tenant,
            "tenant": tenant,
            "title": f"{title} — {tenant.name}",
            "form": form,
            "problems": problems,
            "has_view_permission": True,
        }
        return TemplateResponse(request, "admin/tenants/onboard.html", context)


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    search_fields = ("user__username", "user__email", "tenant__name")
    autocomplete_fields = ()
    readonly_fields = ("created_at",)
