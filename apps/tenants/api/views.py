"""pai-native tenant routes: the teams you belong to (all, for platform admins), read-only.

Teams and their policies change in the admin, where tenant admins manage their own.
"""

from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter

from apps.tenants.models import Tenant

from .serializers import TenantSerializer


class TenantFilter(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Tenant
        fields = ["name"]


@extend_schema_view(
    list=extend_schema(tags=["tenants"], summary="Teams you belong to (all, for platform admins)."),
    retrieve=extend_schema(tags=["tenants"], summary="A team, by slug."),
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
