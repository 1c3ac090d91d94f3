from django.contrib import admin
from django.urls import include, path

from apps.monitoring.views import metrics

from . import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/", include("apps.accounts.login_urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("oidc/", include("apps.accounts.oidc_urls")),
    path("api/", include("pai.api_urls")),
    path("oncall/", include("apps.oncall.urls")),
    path("", include("apps.portal.urls")),
]
