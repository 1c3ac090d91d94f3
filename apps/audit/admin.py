import json

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from apps.accounts.roles import is_platform_admin, is_tenant_admin

from .models import AuditEntry


def _shown(value):
    return "(none)" if value in (None, "") else json.dumps(value) if not isinstance(value, str) else value


class ActorFilter(admin.SimpleListFilter):
    """The actors of the entries the reader may see (a user list filter would name every account)."""

    title = "actor"
    parameter_name = "actor_name"

    def lookups(self, request, model_admin):
        names = model_admin.get_queryset(request).order_by("actor_name").values_list("actor_name", flat=True)
        return [(name, name) for name in names.distinct()[:200]]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(actor_name=self.value())
        return queryset


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only. Platform admins read everything; a tenant admin reads their tenants' entries."""

    list_display = ("created_at", "actor_name", "action", "object_type", "object_repr", "tenant")
    list_filter = (
        ActorFilter,
        ("created_at", admin.DateFieldListFilter),
        "action",
        "object_type",
        ("tenant", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("actor_name", "action", "object_repr", "object_id")
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields if f.name != "changes"] + ["diff", "changes"]

    @admin.display(description="what changed")
    def diff(self, obj):
        """The fields' before → after values as a table (removed struck through, added underlined)."""
        fields = obj.changes.get("fields") if isinstance(obj.changes, dict) else None
        if not isinstance(fields, dict) or not fields:
            return "—"
        rows = format_html_join(
            "", '<tr><th>{}</th><td><del class="before">{}</del></td><td><ins class="after">{}</ins></td></tr>',
            ((name, _shown(pair[0]), _shown(pair[1])) for name, pair in sorted(fields.items())
             if isinstance(pair, (list, tuple)) and len(pair) == 2),
        )
        return format_html('<table class="audit-diff"><thead><tr><th>field</th><th>before</th><th>after</th></tr></thead>'
                           "<tbody>{}</tbody></table>", rows)

    def get_queryset(self, request):
        from apps.accounts.roles import admin_tenant_ids

        queryset = super().get_queryset(request).select_related("tenant")
        if is_platform_admin(request.user):
            return queryset
        return queryset.filter(tenant__in=admin_tenant_ids(request.user))

    def has_module_permission(self, request):
        return is_platform_admin(request.user) or is_tenant_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
