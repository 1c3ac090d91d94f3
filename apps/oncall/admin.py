"""On-call data in the Django admin, for platform admins only.

Incidents change state only through the services (pages and API); here their state and
timeline are read-only, while rotations, SLA rows, calendars and routing rules are
edited as data.
"""

from django import forms
from django.contrib import admin
from django.db import models

from apps.accounts.roles import is_platform_admin
from apps.tenants.admin_mixins import AuditedAdminMixin
from pai.forms import JSON_FORMFIELD_OVERRIDES

from .choices import Severity, Weekday
from .models import (
    Alert,
    AlertRoute,
    ChatWebhook,
    FollowUp,
    GitHubRepository,
    Holiday,
    Incident,
    MonitoringCalendar,
    Notification,
    Rotation,
    RotationMember,
    RotationOverride,
    SlaPolicy,
    TimelineEntry,
)


class PlatformAdminOnly:
    formfield_overrides = {**JSON_FORMFIELD_OVERRIDES, models.URLField: {"assume_scheme": "https"}}

    def has_module_permission(self, request):
        return is_platform_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return is_platform_admin(request.user)

    def has_add_permission(self, request, *args):
        return is_platform_admin(request.user)

    def has_change_permission(self, request, obj=None):
        return is_platform_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        return is_platform_admin(request.user)


class ReadOnly(PlatformAdminOnly):
    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RotationMemberInline(PlatformAdminOnly, admin.TabularInline):
    model = RotationMember
    extra = 1
    autocomplete_fields = ["user"]


class RotationOverrideInline(PlatformAdminOnly, admin.TabularInline):
    model = RotationOverride
    fk_name = "rotation"
    extra = 0
    autocomplete_fields = ["user", "replaces"]


@admin.register(Rotation)
class RotationAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "tenant", "timezone", "handoff_weekday", "handoff_time", "shift_days", "dris_per_shift", "active"]
    list_filter = ["active", "tenant"]
    search_fields = ["name"]
    inlines = [RotationMemberInline, RotationOverrideInline]

    def get_queryset(self, request):
        return Rotation.objects.visible_to(request.user).select_related("tenant")


class MonitoringCalendarForm(forms.ModelForm):
    weekdays = forms.TypedMultipleChoiceField(choices=Weekday.choices, coerce=int, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = MonitoringCalendar
        fields = "__all__"


class HolidayInline(PlatformAdminOnly, admin.TabularInline):
    model = Holiday
    extra = 1


@admin.register(MonitoringCalendar)
class MonitoringCalendarAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    form = MonitoringCalendarForm
    list_display = ["name", "timezone", "start_time", "end_time"]
    inlines = [HolidayInline]


class SlaPolicyForm(forms.ModelForm):
    severities = forms.TypedMultipleChoiceField(choices=Severity.choices, coerce=int, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = SlaPolicy
        fields = "__all__"


@admin.register(SlaPolicy)
class SlaPolicyAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    form = SlaPolicyForm
    list_display = [
        "name", "severities", "cluster_class", "ack_within", "update_every", "escalate_after", "remind_before",
        "calendar", "around_the_clock", "position",
    ]
    list_editable = ["position"]


class ChatWebhookForm(forms.ModelForm):
    """The URL is written, never shown back: it is the channel's credential."""

    url = forms.URLField(
        max_length=2000, required=False, assume_scheme="https", widget=forms.PasswordInput(render_value=False),
        label="Webhook URL",
        help_text="The channel's incoming-webhook URL (Slack: Apps → Incoming Webhooks; Teams: channel → "
        "Connectors → Incoming Webhook). Stored encrypted; leave empty to keep the saved one.",
    )

    class Meta:
        model = ChatWebhook
        fields = ["name", "format", "active"]

    def clean(self):
        data = super().clean()
        if not data.get("url") and not self.instance.url:
            self.add_error("url", "Give the webhook's URL.")
        return data

    def save(self, commit=True):
        if self.cleaned_data.get("url"):
            self.instance.url = self.cleaned_data["url"]
        return super().save(commit)


@admin.register(ChatWebhook)
class ChatWebhookAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    form = ChatWebhookForm
    list_display = ["name", "format", "active", "created_at"]


class GitHubRepositoryForm(forms.ModelForm):
    """The token is written, never shown back."""

    api_url = forms.URLField(
        max_length=300, assume_scheme="https", initial="https://api.github.com", label="API URL",
        help_text=GitHubRepository._meta.get_field("api_url").help_text,
    )

    token = forms.CharField(
        max_length=500, required=False, strip=True, widget=forms.PasswordInput(render_value=False),
        label="Token",
        help_text="A fine-grained personal access token (or a GitHub App's) with Issues: read and write on the "
        "repository. Stored encrypted; leave empty to keep the saved one.",
    )

    class Meta:
        model = GitHubRepository
        fields = ["api_url", "repository", "labels", "active"]

    def clean(self):
        data = super().clean()
        if not data.get("token") and not self.instance.token:
            self.add_error("token", "Give the token.")
        return data

    def save(self, commit=True):
        if self.cleaned_data.get("token"):
            self.instance.token = self.cleaned_data["token"]
        return super().save(commit)


@admin.register(GitHubRepository)
class GitHubRepositoryAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    form = GitHubRepositoryForm
    list_display = ["repository", "api_url", "labels", "active"]


@admin.register(AlertRoute)
class AlertRouteAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "position", "severity", "cluster", "auto_mitigate", "active"]
    list_filter = ["active", "severity"]


class TimelineInline(ReadOnly, admin.TabularInline):
    model = TimelineEntry
    fields = ["created_at", "actor_name", "kind", "from_status", "to_status", "message"]
    readonly_fields = fields
    extra = 0


class FollowUpInline(PlatformAdminOnly, admin.TabularInline):
    model = FollowUp
    extra = 0
    fields = ["title", "owner", "due_date", "link", "issue_url", "issue_error", "done"]
    readonly_fields = ["issue_url", "issue_error"]
    autocomplete_fields = ["owner"]


class AlertInline(ReadOnly, admin.TabularInline):
    model = Alert
    fields = ["fingerprint", "status", "labels", "starts_at", "ends_at"]
    readonly_fields = fields
    extra = 0


@admin.register(Incident)
class IncidentAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["id", "title", "severity", "status", "source", "cluster", "triggered_at", "ack_deadline"]
    list_filter = ["status", "severity", "source", "cluster_class"]
    search_fields = ["title", "description"]
    readonly_fields = [
        "status", "source", "severity", "proposed_severity", "severity_confirmed", "cluster_class", "reporter",
        "triggered_at", "acknowledged_at", "acknowledged_by", "mitigated_at", "resolved_at", "closed_at",
        "last_update_at", "sla", "ack_deadline", "next_update_deadline", "ack_breached_at", "update_breached_at",
        "update_breaches", "reviewed_at",
    ]
    autocomplete_fields = ["assignees"]
    inlines = [FollowUpInline, AlertInline, TimelineInline]

    def get_queryset(self, request):
        return Incident.objects.visible_to(request.user).select_related("cluster")

    def has_add_permission(self, request, *args):
        # Incidents open through reports, alerts and the API, where the SLA is applied.
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Alert)
class AlertAdmin(ReadOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "status", "incident", "starts_at", "ends_at", "last_seen"]
    list_filter = ["status"]

    def get_queryset(self, request):
        return Alert.objects.visible_to(request.user).select_related("incident")


@admin.register(Notification)
class NotificationAdmin(ReadOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["key", "kind", "subject", "sent_at"]
    list_filter = ["kind"]
    search_fields = ["key", "subject"]


@admin.register(FollowUp)
class FollowUpAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["title", "incident", "owner", "due_date", "done"]
    list_filter = ["done"]
    search_fields = ["title", "incident__title"]
    autocomplete_fields = ["owner"]
    raw_id_fields = ["incident"]


@admin.register(RotationOverride)
class RotationOverrideAdmin(PlatformAdminOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["rotation", "user", "replaces", "starts_at", "ends_at", "reason"]
    list_filter = ["rotation"]
    autocomplete_fields = ["user", "replaces"]


@admin.register(TimelineEntry)
class TimelineEntryAdmin(ReadOnly, AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "incident", "actor_name", "kind", "to_status", "message"]
    list_filter = ["kind"]
    search_fields = ["message", "incident__title"]

    def get_queryset(self, request):
        return TimelineEntry.objects.filter(incident__in=Incident.objects.visible_to(request.user)).select_related("incident")
