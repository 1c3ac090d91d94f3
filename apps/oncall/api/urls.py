"""On-call API under /api/v2/ (pai-native routes plus OpenPAI's `GET /api/v2/alerts`)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter(trailing_slash="/?")
router.register("incidents", views.IncidentViewSet, basename="incident")
router.register("rotations", views.RotationViewSet, basename="rotation")

urlpatterns = [
    path("oncall/now", views.OnCallNowView.as_view(), name="oncall-now"),
    path("alerts", views.AlertListView.as_view(), name="alert-list"),
    path("alerts/webhook", views.AlertWebhookView.as_view(), name="alert-webhook"),
    *router.urls,
]
