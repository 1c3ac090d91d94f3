from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.register("tenants", views.TenantViewSet, basename="tenant")

urlpatterns = router.urls
