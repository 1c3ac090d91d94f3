"""OpenPAI's virtual cluster routes: the VCs you can see, with what they hold and are guaranteed."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from apps.accounts.roles import is_platform_admin
from apps.clusters.models import CellType
from apps.virtualclusters.capacity import submit_limits
from apps.virtualclusters.models import PinnedCell, VirtualCluster
from apps.virtualclusters.services import set_quota, set_starvation_threshold
from pai.api.errors import ForbiddenError, NoVirtualClusterError
from pai.api.views import ApiView, ErrorSerializer

from .serializers import (
    EXAMPLE,
    QUOTA_EXAMPLE,
    QuotaSerializer,
    VirtualClusterInfoSerializer,
    present_quota,
    present_virtual_clusters,
)


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


SKU_TYPES_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {"cpu": {"type": "number"}, "memory": {"type": "integer", "description": "MB"},
                       "gpu": {"type": "integer"}},
    },
}
SKU_TYPES_EXAMPLE = {"A100": {"cpu": 8, "memory": 65536, "gpu": 1}, "CPU": {"cpu": 4, "memory": 16384, "gpu": 0}}


def _sku_type(cpu, memory_mb, gpu):
    """OpenPAI's resource unit of one SKU (one leaf cell): {cpu, memory (MB), gpu}."""
    return {"cpu": int(cpu) if float(cpu).is_integer() else cpu, "memory": memory_mb, "gpu": gpu}


def _visible_vc(user, name):
    vc = VirtualCluster.objects.visible_to(user).select_related("cluster").filter(name=name).first()
    if vc is None:
        raise NoVirtualClusterError(f"Virtual cluster {name} is not found.")
    return vc


def vc_sku_types(vc):
    """The SKUs a VC holds cells of, as OpenPAI's `{sku: {cpu, memory, gpu}}`."""
    skus, cells = submit_limits(vc)
    return {
        name: _sku_type(skus[name].cpu, skus[name].memory_mb, skus[name].gpu)
        for name, count in sorted(cells.items()) if count > 0 and name in skus
    }


class VirtualClusterSkuTypesView(ApiView):
    @extend_schema(
        tags=["virtual cluster"],
        operation_id="getVirtualClusterSkuTypes",
        summary="The SKUs a VC holds cells of, with what one leaf cell of each brings.",
        responses={
            200: OpenApiResponse(SKU_TYPES_SCHEMA, description="SKU name → {cpu, memory (MB), gpu}"),
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
        },
        examples=[OpenApiExample("SKUs", value=SKU_TYPES_EXAMPLE, response_only=True)],
    )
    def get(self, request, name):
        return Response(vc_sku_types(_visible_vc(request.user, name)))


class ClusterSkuTypesView(ApiView):
    @extend_schema(
        tags=["virtual cluster"],
        operation_id="getClusterSkuTypes",
        summary="SKU types: every leaf cell type of pai's clusters, or those of one VC (`?vc=`).",
        description="As OpenPAI's `GET /api/v2/cluster/sku-types`. A SKU name used by several clusters is "
        "shown once, as the first cluster by name defines it.",
        parameters=[OpenApiParameter("vc", OpenApiTypes.STR, description="only the SKUs this VC holds cells of")],
        responses={
            200: OpenApiResponse(SKU_TYPES_SCHEMA, description="SKU name → {cpu, memory (MB), gpu}"),
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
        },
        examples=[OpenApiExample("SKUs", value=SKU_TYPES_EXAMPLE, response_only=True)],
    )
    def get(self, request):
        vc = request.query_params.get("vc")
        if vc is not None:
            return Response(vc_sku_types(_visible_vc(request.user, vc)))
        types = {}
        leaves = CellType.objects.filter(child__isnull=True).order_by("cluster__name", "name")
        for name, cpu, memory_mb, gpu in leaves.values_list("name", "cpu", "memory_mb", "gpu"):
            types.setdefault(name, _sku_type(cpu, memory_mb, gpu))
        return Response(dict(sorted(types.items())))


class VirtualClusterQuotaView(ApiView):
    """pai extension: a VC's quota entries. Anyone who sees the VC reads them; platform
    admins replace them (the cluster must back every VC's quota, as in the admin)."""

    @extend_schema(
        tags=["virtual cluster"],
        operation_id="getVirtualClusterQuota",
        summary="A VC's guaranteed cells, entry by entry, with the chain each entry draws from (pai extension).",
        responses={
            200: QuotaSerializer,
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
        },
        examples=[OpenApiExample("Quota", value=QUOTA_EXAMPLE, response_only=True)],
    )
    def get(self, request, name):
        return Response(present_quota(_visible_vc(request.user, name)))

    @extend_schema(
        tags=["virtual cluster"],
        operation_id="setVirtualClusterQuota",
        summary="Replace a VC's guaranteed cells, and set its starvation threshold (platform admins; pai extension).",
        description="Refused (400, naming the entry and field) when a cell type or chain is unknown, an entry "
        "is listed twice, the cluster cannot back every VC's quota, or the quota is below what the VC's running "
        "jobs hold and `confirmShrink` is not set. Pinned cells are kept.",
        request=QuotaSerializer,
        responses={
            200: QuotaSerializer,
            400: OpenApiResponse(ErrorSerializer, description="InvalidParametersError"),
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError"),
            404: OpenApiResponse(ErrorSerializer, description="NoVirtualClusterError"),
        },
        examples=[
            OpenApiExample(
                "Quota", request_only=True,
                value={"cells": [{"cellType": "A100-NODE", "chain": "A100-RACK3", "count": 2}],
                       "starvationThresholdSeconds": 1800, "confirmShrink": False},
            ),
            OpenApiExample("Quota", value=QUOTA_EXAMPLE, response_only=True),
        ],
    )
    def put(self, request, name):
        vc = _visible_vc(request.user, name)
        if not is_platform_admin(request.user):
            raise ForbiddenError("Only platform admins change quotas.")
        serializer = QuotaSerializer(data=request.data, context={"cluster": vc.cluster})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            with transaction.atomic():
                vc = VirtualCluster.objects.select_for_update().get(pk=vc.pk)
                set_quota(request.user, vc, data["cells"], confirm_shrink=data["confirmShrink"])
                if "starvationThresholdSeconds" in data:
                    set_starvation_threshold(request.user, vc, data["starvationThresholdSeconds"])
        except DjangoValidationError as exc:
            field = "confirmShrink" if getattr(exc, "code", None) == "shrink" else "cells"
            raise serializers.ValidationError({field: exc.messages}) from exc
        return Response(present_quota(vc))
