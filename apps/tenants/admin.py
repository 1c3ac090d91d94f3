from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.http import HttpResponse
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from pai.links import public_url

from apps.accounts.roles import is_platform_admin

from .admin_mixins import TenantScopedAdmin
from .forms import BulkOnboardForm, OnboardUserForm
from .mailtemplate import PLACEHOLDERS
from .models import Membership, OnboardingEmail, Tenant
from .services import (
    OnboardingError,
    bulk_onboard,
    members_without_vc,
    onboard_user,
    resend_onboarding_email,
    sample_csv,
)


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_admin_can = ("view", "change")
    list_display = ("name", "slug", "contact_email", "job_retention_days", "member_count", "onboard_links")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    actions = ["onboard_action", "bulk_onboard_action"]
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "contact_email")}),
        ("Jobs", {"fields": ("job_retention_days",)}),
        ("Rate limits", {"fields": ("job_submit_rate", "job_list_rate"),
                         "description": "Per member: job submissions and job lists, such as 20/second burst 300 "
                                        "(300 at once, then 20 a second). Only platform admins change them."}),
        ("Idle GPUs", {"fields": ("idle_gpu_threshold_percent", "idle_gpu_hours", "idle_gpu_action", "idle_gpu_grace_hours")}),
        (
            "Onboarding e-mail",
            {
                "fields": ("onboarding_email_subject", "onboarding_email_template"),
                "description": format_html(
                    "Leave the text empty to send pai's default: how to submit and debug jobs, the user manual, "
                    "retention, the idle-GPU rule, storage, whom to contact and this week's DRI. A text of your own "
                    "uses <code>{{{{ placeholder }}}}</code>, <code>{{{{ placeholder|default:\"text\" }}}}</code> and "
                    "<code>{{% if placeholder %}}…{{% else %}}…{{% endif %}}</code>, nothing else. Placeholders: {}.",
                    format_html_join(", ", "<code title=\"{}\">{}</code>", ((d, n) for n, d in PLACEHOLDERS.items())),
                ),
            },
        ),
    )

    def get_readonly_fields(self, request, obj=None):
        # A tenant admin edits policies, not the tenant's identity.
        return () if is_platform_admin(request.user) else ("name", "slug", "job_submit_rate", "job_list_rate")

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
            path(
                "<int:tenant_id>/sample.csv", self.admin_site.admin_view(self.sample_csv_view), name="tenants_tenant_sample_csv"
            ),
            path(
                "<int:tenant_id>/members/<int:membership_id>/resend/",
                self.admin_site.admin_view(require_POST(self.resend_view)),
                name="tenants_tenant_resend_onboarding",
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
                    base_url=public_url(request),
                )
            except OnboardingError as exc:
                for problem in exc.errors:
                    field, _, message = problem.partition(": ")
                    form.add_error(field if field in form.fields else None, message or problem)
            except PermissionDenied:
                raise
            else:
                self.message_user(request, f"Onboarded {user.username}; the welcome e-mail to {user.email} is on its way.")
                return redirect("admin:tenants_tenant_change", tenant.pk)
        return self._render(request, tenant, form, "Onboard a user", problems=None)

    def bulk_onboard_view(self, request, tenant_id):
        tenant = self._managed_tenant(request, tenant_id)
        form = BulkOnboardForm(request.POST or None, request.FILES or None)
        problems = None
        if request.method == "POST" and form.is_valid():
            try:
                users = bulk_onboard(request.user, tenant, form.cleaned_data["csv_file"], base_url=public_url(request))
            except OnboardingError as exc:
                problems = exc.errors
                self.message_user(request, "Nobody was onboarded: fix the lines below and upload again.", messages.ERROR)
            else:
                names = ", ".join(u.username for u in users[:20]) + (f" and {len(users) - 20} more" if len(users) > 20 else "")
                self.message_user(request, f"Onboarded {len(users)} users: {names}. Their welcome e-mails are on their way.")
                stranded = members_without_vc(users)
                if stranded:
                    self.message_user(
                        request,
                        f"{len(stranded)} of them are in no group that grants a virtual cluster and cannot submit "
                        f"jobs anywhere: {', '.join(u.username for u in stranded[:20])}"
                        f"{' …' if len(stranded) > 20 else ''}.",
                        messages.WARNING,
                    )
                return redirect("admin:tenants_tenant_change", tenant.pk)
        return self._render(request, tenant, form, "Bulk-onboard users from CSV", problems=problems)

    def sample_csv_view(self, request, tenant_id):
        tenant = self._managed_tenant(request, tenant_id)
        response = HttpResponse(sample_csv(tenant), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="onboard-{tenant.slug}.csv"'
        return response

    def resend_view(self, request, tenant_id, membership_id):
        tenant = self._managed_tenant(request, tenant_id)
        membership = get_object_or_404(Membership.objects.filter(tenant=tenant).select_related("user", "tenant"), pk=membership_id)
        resend_onboarding_email(request.user, membership, base_url=public_url(request))
        self.message_user(request, f"The welcome e-mail to {membership.user.email} is queued again.")
        return redirect("admin:tenants_tenant_change", tenant.pk)

    # How many members the team page lists; the members list has them all.
    MEMBERS_ON_PAGE = 200

    def change_view(self, request, object_id, form_url="", extra_context=None):
        tenant = self.get_object(request, object_id)
        extra_context = extra_context or {}
        if tenant is not None:
            members = (
                Membership.objects.filter(tenant=tenant)
                .select_related("user", "onboarding_email")
                .prefetch_related("user__groups")
                .order_by("user__username")
            )
            extra_context.update({
                "members": members[: self.MEMBERS_ON_PAGE],
                "member_total": members.count(),
                "members_url": reverse("admin:tenants_membership_changelist") + f"?tenant__id__exact={tenant.pk}",
                "onboard_url": reverse("admin:tenants_tenant_onboard", args=[tenant.pk]),
                "bulk_onboard_url": reverse("admin:tenants_tenant_bulk_onboard", args=[tenant.pk]),
                "sample_csv_url": reverse("admin:tenants_tenant_sample_csv", args=[tenant.pk]),
            })
        return super().change_view(request, object_id, form_url, extra_context)

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
            "sample_csv_url": reverse("admin:tenants_tenant_sample_csv", args=[tenant.pk]),
        }
        return TemplateResponse(request, "admin/tenants/onboard.html", context)


def onboarding_state(membership):
    """The member's welcome e-mail as the admin shows it ("—" for members from before pai kept it)."""
    email = getattr(membership, "onboarding_email", None)
    if email is None:
        return "—"
    if email.status == OnboardingEmail.Status.SENT:
        return f"sent {email.sent_at:%Y-%m-%d %H:%M}"
    detail = f" ({email.attempts} attempt{'s' if email.attempts != 1 else ''}: {email.last_error})" if email.last_error else ""
    return f"{email.get_status_display()}{detail}"


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ("user", "tenant", "role", "groups", "last_login", "onboarding_email", "created_at")
    list_filter = ("role", "tenant", "onboarding_email__status")
    search_fields = ("user__username", "user__email", "tenant__name")
    autocomplete_fields = ()
    readonly_fields = ("created_at", "onboarding_email")
    actions = ["resend_onboarding_action"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user", "tenant", "onboarding_email").prefetch_related("user__groups")

    @admin.display(description="groups")
    def groups(self, obj):
        return ", ".join(sorted(g.name for g in obj.user.groups.all()))

    @admin.display(description="last login", ordering="user__last_login")
    def last_login(self, obj):
        return obj.user.last_login

    @admin.display(description="onboarding e-mail", ordering="onboarding_email__status")
    def onboarding_email(self, obj):
        return onboarding_state(obj)

    @admin.action(description="Resend the onboarding e-mail")
    def resend_onboarding_action(self, request, queryset):
        base_url = public_url(request)
        count = 0
        for membership in queryset.select_related("tenant", "user"):
            resend_onboarding_email(request.user, membership, base_url=base_url)
            count += 1
        self.message_user(request, f"Queued {count} onboarding e-mail{'s' if count != 1 else ''} again.")
