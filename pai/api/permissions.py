"""Permission classes shared by the API views."""

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission

from apps.accounts.models import ApiToken
from apps.accounts.roles import is_platform_admin

from .errors import ForbiddenError, NoApiError


class IsPlatformAdmin(BasePermission):
    message = "Non-admin is not allowed to do this operation."

    def has_permission(self, request, view):
        return is_platform_admin(request.user)


class ReadOnlyOrPlatformAdmin(BasePermission):
    message = "Non-admin is not allowed to do this operation."

    def has_permission(self, request, view):
        return request.method in SAFE_METHODS or is_platform_admin(request.user)


class NotApplicationToken(BasePermission):
    """OpenPAI's rule: application tokens are for job operations; they cannot manage tokens or accounts."""

    def has_permission(self, request, view):
        if isinstance(request.auth, ApiToken) and request.auth.application:
            raise ForbiddenError("Applications are not allowed to do this operation.")
        return True


class BasicModeOnly(BasePermission):
    """Routes OpenPAI serves only in basic authentication mode; in OIDC mode they do not exist."""

    def has_permission(self, request, view):
        if settings.PAI_AUTH_MODE != "basic":
            raise NoApiError(f"{request.method} {request.path} is not available in OIDC mode.")
        return True
