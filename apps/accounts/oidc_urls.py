"""pai's pages of OIDC mode, under /oidc/ (OpenPAI's routes are in oidc_api_urls).

The names of the flow's routes are mozilla-django-oidc's defaults, which its views reverse.
"""

from django.urls import path

from . import oidc_views

urlpatterns = [
    path("authenticate/", oidc_views.login, name="oidc_authentication_init"),
    path("callback/", oidc_views.callback, name="oidc_authentication_callback"),
    path("logout/", oidc_views.logout, name="oidc_logout"),
    path("token/", oidc_views.api_token, name="oidc_api_token"),
]
