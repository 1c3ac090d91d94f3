"""OIDC mode's pages and OpenPAI routes: login, callback, logout, an API token for the session.

Every view here exists only in OIDC mode: pages answer 404 otherwise, API routes answer
OpenPAI's `NoApiError`, as OpenPAI's REST server serves its OIDC routes only in that mode.
Redirect targets given by clients (`next`, OpenPAI's `redirect_uri` and `from`) are
honoured only when they stay on pai's own origin.
"""

import logging
from functools import wraps

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.decorators import login_required
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
    OIDCLogoutView,
)
from rest_framework.permissions import AllowAny, BasePermission

from pai.api.errors import NoApiError
from pai.api.views import ApiView, ErrorSerializer

from . import services
from .oidc import REFUSED_NAME_TAKEN, REFUSED_NO_GROUP, provider_logout_url

NEXT_PARAMETERS = ("next", "redirect_uri", "from")

# Where Django logs the SuspiciousOperation it turns into a 400 by itself.
security_logger = logging.getLogger("django.security.oidc")


def oidc_mode():
    return settings.PAI_AUTH_MODE == "oidc"


def oidc_only(view):
    """A page that exists only in OIDC mode."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not oidc_mode():
            raise Http404("This page exists only when pai authenticates through OIDC.")
        return view(request, *args, **kwargs)

    return wrapped


class OidcModeOnly(BasePermission):
    def has_permission(self, request, view):
        if not oidc_mode():
            raise NoApiError(f"{request.method} {request.path} is available only in OIDC mode.")
        return True


def safe_next(request, default=None):
    """The first redirect target among NEXT_PARAMETERS that stays on pai's origin, else `default`."""
    for name in NEXT_PARAMETERS:
        target = request.GET.get(name)
        if target and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return target
    return default


def contact():
    return settings.PAI_OIDC_ACCESS_CONTACT


# --- The flow -------------------------------------------------------------------------
class LoginView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider; the callback returns it to a same-origin target."""

    def get(self, request):
        response = super().get(request)
        # mozilla-django-oidc reads only `next`; OpenPAI's clients send `redirect_uri` or `from`.
        request.session["oidc_login_next"] = safe_next(request)
        return response


class CallbackView(OIDCAuthenticationCallbackView):
    def get(self, request):
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            # A state this browser did not start, a nonce or signature that does not
            # verify: someone may be replaying or forging a login. Say no, and log it.
            security_logger.warning("OIDC callback refused: %s", exc)
            return render(request, "accounts/oidc/failed.html", {"contact": contact()}, status=400)

    def login_failure(self):
        if getattr(self.request, "pai_oidc_refusal", None) == REFUSED_NO_GROUP:
            return render(self.request, "accounts/oidc/refused.html", {"contact": contact()}, status=403)
        if getattr(self.request, "pai_oidc_refusal", None) == REFUSED_NAME_TAKEN:
            return render(self.request, "accounts/oidc/name_taken.html", {"contact": contact()}, status=403)
        return render(self.request, "accounts/oidc/failed.html", {"contact": contact()}, status=403)


class LogoutView(OIDCLogoutView):
    @property
    def redirect_url(self):
        # Django's default LOGOUT_REDIRECT_URL is None, which mozilla-django-oidc cannot resolve.
        return resolve_url(settings.LOGOUT_REDIRECT_URL or "/")


login = oidc_only(LoginView.as_view())
callback = oidc_only(CallbackView.as_view())
# POST only (a cross-site page cannot log people out); the admin's logout comes here too.
logout = oidc_only(LogoutView.as_view())


# --- Pages ----------------------------------------------------------------------------
@oidc_only
@login_required
@require_http_methods(["GET", "POST"])
def api_token(request):
    """A login token of the OpenPAI API for the signed-in user, shown once."""
    token = expires_at = None
    if request.method == "POST":
        row, token = services.issue_login_token(request.user)
        expires_at = row.expires_at
    response = render(request, "accounts/oidc/token.html", {"token": token, "expires_at": expires_at})
    add_never_cache_headers(response)
    return response


def admin_login(request, site):
    """The admin's login in OIDC mode: the provider checks who people are, pai's roles the rest."""
    target = safe_next(request, default=reverse("admin:index", current_app=site.name))
    if not request.user.is_authenticated:
        return HttpResponseRedirect(f"{reverse('oidc_authentication_init')}?{urlencode({'next': target})}")
    if site.has_permission(request):
        return HttpResponseRedirect(target)
    return render(request, "accounts/oidc/admin_refused.html", {"contact": contact()}, status=403)


# --- OpenPAI's routes -----------------------------------------------------------------
REDIRECT_PARAMETERS = [
    OpenApiParameter(
        name, str, description="Where to send the browser afterwards; honoured only on pai's own origin."
    )
    for name in ("redirect_uri", "from")
]


class OidcLoginView(ApiView):
    authentication_classes = []
    permission_classes = [AllowAny, OidcModeOnly]

    @extend_schema(
        tags=["authn"],
        operation_id="oidcLogin",
        summary="Log in through the OIDC provider (OIDC mode only): redirects the browser to it.",
        description="After the provider's callback the browser has a pai session and goes to `redirect_uri` "
        "(or `from`) when it is on pai's own origin, else to the home page. Unlike OpenPAI, pai does not put "
        "a token in that URL: a signed-in browser gets one from /oidc/token/.",
        parameters=REDIRECT_PARAMETERS,
        responses={302: OpenApiResponse(description="To the provider's authorization endpoint."),
                   404: OpenApiResponse(ErrorSerializer, description="NoApiError: pai is in basic mode.")},
    )
    def get(self, request):
        return login(request._request)


class OidcLogoutView(ApiView):
    authentication_classes = []
    permission_classes = [AllowAny, OidcModeOnly]

    @extend_schema(
        tags=["authn"],
        operation_id="oidcLogout",
        summary="Log out of pai and of the OIDC provider (OIDC mode only).",
        description="Ends the browser's pai session, then redirects to the provider's end-session endpoint "
        "when one is configured, which returns to `redirect_uri` (same origin only) or the home page. "
        "Bearer tokens stay valid: revoke them with DELETE /api/v2/tokens/{token}.",
        parameters=REDIRECT_PARAMETERS,
        responses={302: OpenApiResponse(description="To the provider's end-session endpoint or back to pai."),
                   404: OpenApiResponse(ErrorSerializer, description="NoApiError: pai is in basic mode.")},
    )
    def get(self, request):
        django_request = request._request
        target = safe_next(django_request)
        return_to = django_request.build_absolute_uri(target) if target else None
        url = provider_logout_url(django_request, return_to)
        auth.logout(django_request)
        return HttpResponseRedirect(url)
