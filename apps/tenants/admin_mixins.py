"""One piece for every pai ModelAdmin: tenant scoping of rows, choices and permissions, and audit.

Platform admins see and change everything. Tenant admins see the rows of the tenants they
administer (through each model's `manageable_by` queryset) and only the choices in those
tenants in every foreign-key and many-to-many field. Every admin addition, change and
deletion is written to pai's audit log with its actor.
"""

from django.contrib import admin
from django.contrib.admin.filters import FieldListFilter, RelatedFieldListFilter
from django.contrib.auth import get_user_model

from apps.accounts.roles import admin_tenant_ids, is_platform_admin, is_tenant_admin
from apps.audit.services import field_values, model_diff, record
from pai.forms import JSON_FORMFIELD_OVERRIDES


def users_manageable_by(user):
    User = get_user_model()
    if is_platform_admin(user):
        return User.objects.all()
    return User.objects.filter(memberships__tenant__in=admin_tenant_ids(user)).distinct()


def scoped_choices(model, user):
    """The rows of `model` a user may pick in a form field, or None when the model is not scoped."""
    if model is get_user_model():
        return users_manageable_by(user)
    manager = model._default_manager
    if hasattr(manager, "manageable_by"):
        return manager.manageable_by(user)
    return None


class ScopedRelatedFieldListFilter(RelatedFieldListFilter):
    """The sidebar filter of a relation (tenant, group, user, VC, storage...) offers a tenant
    admin only what they may see: rows of the related model they manage (where it is scoped)
    that also appear in their own rows of the list. Platform admins get every choice.

    Registered ahead of Django's own filter for every relation, so that no admin list — nor a
    future one — names another tenant's objects in its sidebar."""

    def field_choices(self, field, request, model_admin):
        if is_platform_admin(request.user):
            return super().field_choices(field, request, model_admin)
        related = field.related_model
        # Values present in the rows this admin may list, through the filter's whole path.
        present = model_admin.get_queryset(request).values_list(f"{self.field_path}__pk", flat=True)
        allowed = related._default_manager.filter(pk__in=present)
        scoped = scoped_choices(related, request.user)
        if scoped is not None:
            allowed = allowed.filter(pk__in=scoped.values("pk"))
        ordering = self.field_admin_ordering(field, request, model_admin)
        return field.get_choices(include_blank=False, ordering=ordering,
                                 limit_choices_to={"pk__in": list(allowed.values_list("pk", flat=True))})


FieldListFilter.register(lambda f: f.remote_field, ScopedRelatedFieldListFilter, take_priority=True)


class AuditedAdminMixin:
    """Writes pai audit rows next to Django's admin LogEntry for every add, change and delete,
    with the fields' values: `{"fields": {name: [before, after]}}`, one row per object,
    rows of inlines (a VC's cells and grants, a storage's grants) each on their own.
    JSON fields are read within pai's nesting bound (`pai.forms`)."""

    formfield_overrides = JSON_FORMFIELD_OVERRIDES

    def _stored(self, obj):
        if obj.pk is None:
            return {}
        stored = type(obj)._default_manager.filter(pk=obj.pk).first()
        return field_values(stored) if stored is not None else {}

    def save_model(self, request, obj, form, change):
        before = self._stored(obj) if change else {}
        super().save_model(request, obj, form, change)
        obj._pai_audit_diff = model_diff(before, field_values(obj))

    def save_formset(self, request, form, formset, change):
        # By instance: a deleted object's pk is None once it is gone.
        befores = {id(f.instance): (str(f.instance.pk), self._stored(f.instance)) for f in formset.initial_forms if f.instance.pk}
        super().save_formset(request, form, formset, change)
        parent = form.instance
        for obj in formset.new_objects:
            record(request.user, f"admin.add.{obj._meta.model_name}", obj, tenant=_tenant_of(parent),
                   changes={"fields": model_diff({}, field_values(obj)), "parent": str(parent)})
        for obj, _names in formset.changed_objects:
            record(request.user, f"admin.change.{obj._meta.model_name}", obj, tenant=_tenant_of(parent),
                   changes={"fields": model_diff(befores.get(id(obj), ("", {}))[1], field_values(obj)), "parent": str(parent)})
        for obj in formset.deleted_objects:
            record(request.user, f"admin.delete.{obj._meta.model_name}", obj, tenant=_tenant_of(parent),
                   changes={"fields": model_diff(befores.get(id(obj), ("", {}))[1], {}), "parent": str(parent)},
                   object_id=befores.get(id(obj), ("", {}))[0])

    def log_addition(self, request, obj, message):
        record(request.user, f"admin.add.{obj._meta.model_name}", obj,
               changes={"fields": getattr(obj, "_pai_audit_diff", None) or model_diff({}, field_values(obj))})
        return super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        record(request.user, f"admin.change.{obj._meta.model_name}", obj,
               changes={"fields": getattr(obj, "_pai_audit_diff", {}), "message": str(message)})
        return super().log_change(request, obj, message)

    def log_deletions(self, request, queryset):
        for obj in queryset:
            record(request.user, f"admin.delete.{obj._meta.model_name}", obj,
                   changes={"fields": model_diff(field_values(obj), {})})
        return super().log_deletions(request, queryset)


def _tenant_of(obj):
    tenant = getattr(obj, "tenant", None)
    from apps.tenants.models import Tenant

    return tenant if isinstance(tenant, Tenant) else None


class PlatformAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """Models only platform admins manage (clusters, cell types...)."""

    def has_module_permission(self, request):
        return is_platform_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return is_platform_admin(request.user)

    def has_add_permission(self, request):
        return is_platform_admin(request.user)

    def has_change_permission(self, request, obj=None):
        return is_platform_admin(request.user)

    def has_delete_permission(self, request, obj=None):
        return is_platform_admin(request.user)


class TenantRoleMixin:
    """What a tenant admin may do, shared by model admins and inlines.

    `tenant_admin_can` lists the actions ("view", "add", "change", "delete"); platform
    admins may do everything. With an object (the row itself, or an inline's parent) the
    object must also be one the tenant admin manages. Foreign-key choices are scoped.
    """

    tenant_admin_can = ("view", "add", "change", "delete")

    def _allowed(self, request, action, obj=None):
        user = request.user
        if is_platform_admin(user):
            return True
        if action not in self.tenant_admin_can or not is_tenant_admin(user):
            return False
        if obj is not None:
            return type(obj)._default_manager.manageable_by(user).filter(pk=obj.pk).exists()
        return True

    def has_module_permission(self, request):
        return self._allowed(request, "view")

    def has_view_permission(self, request, obj=None):
        return self._allowed(request, "view", obj) or self._allowed(request, "change", obj)

    def has_add_permission(self, request, obj=None):
        return self._allowed(request, "add", obj)

    def has_change_permission(self, request, obj=None):
        return self._allowed(request, "change", obj)

    def has_delete_permission(self, request, obj=None):
        return self._allowed(request, "delete", obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        choices = scoped_choices(db_field.related_model, request.user)
        if choices is not None:
            kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class TenantScopedAdmin(TenantRoleMixin, AuditedAdminMixin, admin.ModelAdmin):
    """Models tenant admins manage inside their own tenants (rows through `manageable_by`)."""

    def get_queryset(self, request):
        return super().get_queryset(request).manageable_by(request.user)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        choices = scoped_choices(db_field.related_model, request.user)
        if choices is not None:
            kwargs["queryset"] = choices
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class TenantScopedInline(TenantRoleMixin):
    """Inline counterpart of TenantScopedAdmin: permissions follow the parent object."""
