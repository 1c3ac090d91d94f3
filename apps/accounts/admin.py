from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group as AuthGroup

from apps.tenants.admin_mixins import AuditedAdminMixin, TenantScopedAdmin, users_manageable_by
from apps.tenants.models import Membership

from .forms import PaiUserChangeForm, PaiUserCreationForm
from .models import Group
from .roles import admin_tenant_ids, forget, is_platform_admin, is_tenant_admin

User = get_user_model()

# pai's groups stand on Django's; one admin page for them, with their tenant and external name.
admin.site.unregister(AuthGroup)
admin.site.unregister(User)


@admin.register(Group)
class GroupAdmin(TenantScopedAdmin):
    list_display = ("name", "tenant", "external_name", "member_count", "is_builtin")
    list_filter = ("tenant", "is_builtin")
    search_fields = ("name", "external_name", "description")
    fields = ("name", "tenant", "external_name", "description")

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if not is_platform_admin(request.user):
            # A tenant admin's groups always belong to one of their tenants.
            form.base_fields["tenant"].required = True
            form.base_fields["tenant"].empty_label = None
        return form

    def get_readonly_fields(self, request, obj=None):
        return ("name",) if obj is not None and obj.is_builtin else ()

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.is_builtin:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="members")
    def member_count(self, obj):
        return obj.user_set.count()


class MembershipOfUserInline(admin.TabularInline):
    model = Membership
    fk_name = "user"
    extra = 0
    fields = ("tenant", "role")

    def get_queryset(self, request):
        return super().get_queryset(request).manageable_by(request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant":
            from apps.tenants.models import Tenant

            kwargs["queryset"] = Tenant.objects.manageable_by(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _manages(self, request):
        return is_platform_admin(request.user) or is_tenant_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return self._manages(request)

    def has_change_permission(self, request, obj=None):
        return self._manages(request)

    def has_add_permission(self, request, obj=None):
        return self._manages(request)

    def has_delete_permission(self, request, obj=None):
        return self._manages(request)


@admin.register(User)
class PaiUserAdmin(AuditedAdminMixin, UserAdmin):
    """Users: platform admins see all; a tenant admin sees and edits the members of their tenants.

    A tenant admin may change names, e-mail, active flag and the user's groups within
    their tenants; groups the user has elsewhere are kept untouched. New users arrive
    through onboarding (see the tenant's page), which also sends the welcome e-mail.
    """

    inlines = [MembershipOfUserInline]
    form = PaiUserChangeForm
    add_form = PaiUserCreationForm
    list_display = ("username", "email", "first_name", "last_name", "is_active", "tenants")
    list_filter = ("is_active", "memberships__tenant")
    tenant_admin_fieldsets = (
        (None, {"fields": ("username",)}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Access", {"fields": ("is_active", "groups")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )

    def get_queryset(self, request):
        return users_manageable_by(request.user).prefetch_related("memberships__tenant")

    @admin.display(description="teams")
    def tenants(self, obj):
        return ", ".join(m.tenant.name for m in obj.memberships.all())

    def get_fieldsets(self, request, obj=None):
        if obj is None or is_platform_admin(request.user):
            return super().get_fieldsets(request, obj)
        return self.tenant_admin_fieldsets

    def get_readonly_fields(self, request, obj=None):
        if is_platform_admin(request.user):
            return ()
        if obj is not None and self._shared_beyond_scope(request, obj):
            # The account is not this team's alone: only its groups here may change.
            return ("username", "first_name", "last_name", "email", "is_active", "last_login", "date_joined")
        return ("username", "last_login", "date_joined")

    def _shared_beyond_scope(self, request, obj):
        if is_platform_admin(obj):
            return True
        return obj.memberships.exclude(tenant__in=admin_tenant_ids(request.user)).exists()

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "groups" and not is_platform_admin(request.user):
            kwargs["queryset"] = AuthGroup.objects.filter(group__tenant__in=admin_tenant_ids(request.user))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change):
        # The groups field only offers the admin's own tenants' groups; saving it must not
        # drop the user's groups outside that scope (other tenants', built-in ones).
        kept = []
        if change and not is_platform_admin(request.user):
            offered = form.fields["groups"].queryset if "groups" in form.fields else AuthGroup.objects.none()
            kept = list(form.instance.groups.exclude(pk__in=offered.values("pk")))
        super().save_related(request, form, formsets, change)
        if kept:
            form.instance.groups.add(*kept)
        forget(form.instance)

    def _manages(self, request, obj=None):
        if is_platform_admin(request.user):
            return True
        if not is_tenant_admin(request.user):
            return False
        return obj is None or users_manageable_by(request.user).filter(pk=obj.pk).exists()

    def has_module_permission(self, request):
        return self._manages(request)

    def has_view_permission(self, request, obj=None):
        return self._manages(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._manages(request, obj)

    def has_add_permission(self, request):
        return is_platform_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        # A user may belong to several tenants: only platform admins delete accounts.
        return is_platform_admin(request.user)
