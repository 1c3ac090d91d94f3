"""Everything under /api/: the OpenPAI-compatible v2 routes, pai-native routes, the schema."""

from django.urls import include, path

urlpatterns = [
    path("v2/", include("apps.oncall.api.urls")),
]
