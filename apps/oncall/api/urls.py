"""On-call API under /api/v2/ (pai-native routes plus OpenPAI's `GET /api/v2/alerts`)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

class OptionalSlashRouter(SimpleRouter):
    """Serve `/api/v2/incidents` as OpenPAI clients spell routes, and `/incidents/` as DRF does."""

    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"


router = OptionalSlashRouter()
router.register("incidents", views.IncidentViewSet, basename="incident")
router.register("rotations", views.RotationViewSet, basename="rotation")

urlpatterns = [
    path("oncall/now", views.OnCallNowView.as_view(), name="oncall-now"),
    path("alerts", views.AlertListView.as_view(), name="alert-list"),
    path("alerts/webhook", views.AlertWebhookView.as_view(), name="alert-webhook"),
    *router.urls,
]
