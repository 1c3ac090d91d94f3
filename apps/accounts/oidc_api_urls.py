"""OpenPAI's OIDC routes, under /api/v2/ (no trailing slash, as OpenPAI's REST server)."""

from django.urls import path

from . import oidc_views

urlpatterns = [
    path("authn/oidc/login", oidc_views.OidcLoginView.as_view(), name="authn-oidc-login"),
    path("authn/oidc/logout", oidc_views.OidcLogoutView.as_view(), name="authn-oidc-logout"),
]
