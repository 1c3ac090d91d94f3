from django.contrib import admin

from apps.accounts.sharing_admin import SharingAdminMixin
from apps.tenants.admin_mixins import TenantScopedAdmin, TenantScopedInline

from .models import StorageConfig, StorageGrant, StorageServer


@admin.register(StorageServer)
class StorageServerAdmin(TenantScopedAdmin):
    tenant_admin_can = ("view",)
    list_display = ("name", "kind", "address", "root_path", "tenant")
    list_filter = ("kind", "tenant")
    search_fields = ("name", "address")


class StorageGrantInline(TenantScopedInline, admin.TabularInline):
    model = StorageGrant
    extra = 0


@admin.register(StorageConfig)
class StorageConfigAdmin(SharingAdminMixin, TenantScopedAdmin):
    list_display = ("name", "server", "mount_path", "read_only", "per_user_sub_path", "tenant")
    list_filter = ("tenant", "read_only")
    search_fields = ("name", "claim_name", "mount_path")
    inlines = [StorageGrantInline]


@admin.register(StorageGrant)
class StorageGrantAdmin(TenantScopedAdmin):
    list_display = ("storage", "group", "is_default")
    list_filter = ("is_default",)
    search_fields = ("storage__name", "group__name")
