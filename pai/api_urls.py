"""Everything under /api/: the OpenPAI-compatible v2 routes, pai-native routes, the schema."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from pai.api.info import InfoView
from pai.api.routing import openpai_path
from pai.api.views import UnknownRouteView

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    *openpai_path("v2/info", InfoView.as_view(), "api-info"),
    path("v2/", include("apps.accounts.api.urls")),
    path("v2/", include("apps.accounts.oidc_api_urls")),
    path("v2/", include("apps.virtualclusters.api.urls")),
    path("v2/", include("apps.storage.api.urls")),
    path("v2/", include("apps.clusters.api.urls")),
    path("v2/", include("apps.tenants.api.urls")),
    path("v2/", include("apps.oncall.api.urls")),
    path("v2/", include("apps.jobs.api.urls")),
    path("v2/", include("apps.usage.api.urls")),
    # Keep last: whatever no route above matches answers OpenPAI's JSON NotFoundError.
    re_path(r"^(?P<path>.*)$", UnknownRouteView.as_view(), name="api-unknown-route"),
]
