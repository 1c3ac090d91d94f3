"""OpenPAI's virtual cluster routes: the VCs you can see, with what they hold and are guaranteed."""

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.response import Response

from apps.virtualclusters.models import PinnedCell, VirtualCluster
from pai.api.errors import NoVirtualClusterError
from pai.api.views import ApiView, ErrorSerializer

from .serializers import EXAMPLE, VirtualClusterInfoSerializer, present_virtual_clusters


def _visible_vcs(user):
    return (
        VirtualCluster.objects.visible_to(user)
        .select_related("cluster")
        .prefetch_related(
            "cells", Prefetch("pinned_cells", queryset=PinnedCell.objects.select_related("physical_cell"))
        )
        .order_by("name")
    )


class VirtualClusterListView(ApiView):
    @extend_schema(
        tags=["virtual cluster"],
        operation_id="listVirtualClusters",
        summary="The VCs you can see: your teams' VCs and those granted to your groups (all, for platform admins).",
        description="A map from VC name to the VC. Used resources are those held by the VC's jobs.",
        responses={
            200: OpenApiResponse(
                {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/VirtualClusterInfo"}},
                description="name → virtual cluster",
            ),
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
        },
        examples=[OpenApiExample("VCs", value={"team_a": EXAMPLE}, response_only=True)],
    )
    def get(self, request):
        return Response(present_virtual_clusters(_visible_vcs(request.user)))


class VirtualClusterDetailView(ApiView):
    @extend_schema(
        tags=["virtual cluster"],
        operation_id="getVirtualCluster",
        summary="One VC, if you can see it.",
        responses={
            200: VirtualClusterInfoSerializer,
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
        },
        examples=[OpenApiExample("VC", value=EXAMPLE, response_only=True)],
    )
    def get(self, request, name):
        vcs = list(_visible_vcs(request.user).filter(name=name))
        if not vcs:
            raise NoVirtualClusterError(f"Virtual cluster {name} is not found.")
        return Response(present_virtual_clusters(vcs)[name])
