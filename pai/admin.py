"""pai's admin site: open to platform admins and to tenant admins (scoped to their tenants)."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from apps.accounts.roles import is_platform_admin, is_tenant_admin


class PaiAdminSite(admin.AdminSite):
    site_header = "pai administration"
    site_title = "pai"
    index_title = "Teams, clusters and access"

    def has_permission(self, request):
        # Tenant admins need no is_staff flag or model permissions: pai's own roles decide.
        user = request.user
        return user.is_active and (is_platform_admin(user) or is_tenant_admin(user))

    # In OIDC mode the provider checks who people are: the admin's login and logout go
    # through it. (Imported when called: this module loads before the accounts app's views.)
    def login(self, request, extra_context=None):
        if settings.PAI_AUTH_MODE == "oidc":
            from apps.accounts.oidc_views import admin_login

            return admin_login(request, self)
        return super().login(request, extra_context)

    def logout(self, request, extra_context=None):
        if settings.PAI_AUTH_MODE == "oidc":
            from apps.accounts.oidc_views import logout

            return logout(request)
        return super().logout(request, extra_context)


class PaiAdminLoginForm(AuthenticationForm):
    """The admin login accepts pai's roles instead of Django's is_staff flag."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "not_admin": "This account is not an administrator of pai or of a team.",
    }

    def confirm_login_allowed(self, user):
        super().confirm_login_allowed(user)
        if not (is_platform_admin(user) or is_tenant_admin(user)):
            raise ValidationError(self.error_messages["not_admin"], code="not_admin")


PaiAdminSite.login_form = PaiAdminLoginForm
