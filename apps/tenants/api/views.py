"""pai-native tenant routes: the teams you belong to (all, for platform admins), read-only.

Teams and their policies change in the admin, where tenant admins manage their own.
"""

from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter

from apps.tenants.models import Tenant

from .serializers import TenantSerializer


EXAMPLE = OpenApiExample("Team", response_only=True, value={
    "slug": "team-a", "name": "Team A", "description": "Vision and speech research",
    "contact_email": "team-a-admins@example.com", "job_retention_days": 30, "idle_gpu_threshold_percent": 5,
    "idle_gpu_hours": 24, "idle_gpu_action": "notify", "idle_gpu_grace_hours": 12, "created_at": "2026-12-01T09:00:00Z"})


class TenantFilter(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Tenant
        fields = ["name"]


@extend_schema_view(
    list=extend_schema(tags=["tenants"], summary="Teams you belong to (all, for platform admins).", examples=[EXAMPLE]),
    retrieve=extend_schema(tags=["tenants"], summary="A team, by slug.", examples=[EXAMPLE]),
)
class TenantViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TenantSerializer
    lookup_field = "slug"
    filter_backends = [filters.DjangoFilterBackend, OrderingFilter]
    filterset_class = TenantFilter
    ordering_fields = ["name", "slug", "created_at"]
    ordering = ["name"]

    def get_queryset(self):
        return Tenant.objects.visible_to(self.request.user)
