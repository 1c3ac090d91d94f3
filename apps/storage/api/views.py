"""OpenPAI's storage routes: the storages granted to you.

A storage of your own team that is not granted to you answers 403 (OpenPAI's
ForbiddenUserError); one of another team answers 404 as if absent, so that the names of
other teams' storages do not leak.
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from apps.accounts.roles import group_ids_of, is_platform_admin
from apps.storage.models import StorageConfig, StorageGrant
from pai.api.errors import ApiError, ForbiddenError, NoStorageError
from pai.api.views import ApiView, ErrorSerializer

from . import serializers as s

TRUE, FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}


def _usable_storages(user):
    """Storages the user may mount: those granted to their groups (all, for platform admins)."""
    if is_platform_admin(user):
        return StorageConfig.objects.all()
    return StorageConfig.objects.granted_to(user)


def _default_ids(user):
    return set(StorageGrant.objects.filter(group_id__in=group_ids_of(user), is_default=True).values_list("storage_id", flat=True))


class StorageListView(ApiView):
    @extend_schema(
        tags=["storage"],
        operation_id="getStorages",
        summary="Storages granted to you (all, for platform admins).",
        parameters=[OpenApiParameter("default", OpenApiTypes.BOOL, description="If true, only your default storages.")],
        responses={
            200: s.StorageListSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Bad `default` value"),
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
        },
        examples=[OpenApiExample("Storages", value={"storages": [s.SUMMARY_EXAMPLE]}, response_only=True)],
    )
    def get(self, request):
        flag = request.query_params.get("default", "").strip().lower()
        if flag not in TRUE | FALSE:
            raise ApiError("default: must be true or false.")
        defaults = _default_ids(request.user)
        storages = _usable_storages(request.user).order_by("name")
        if flag in TRUE:
            storages = storages.filter(pk__in=defaults)
        return Response({"storages": [s.present_summary(st, st.pk in defaults) for st in storages]})


class StorageDetailView(ApiView):
    @extend_schema(
        tags=["storage"],
        operation_id="getStorage",
        summary="A storage granted to you, with where its data lives.",
        responses={
            200: s.StorageDetailSerializer,
            401: OpenApiResponse(ErrorSerializer, description="UnauthorizedUserError"),
            403: OpenApiResponse(ErrorSerializer, description="ForbiddenUserError: your team's, not granted to you"),
            404: OpenApiResponse(ErrorSerializer, description="NoStorageError"),
        },
        examples=[
            OpenApiExample("Storage", value=s.DETAIL_EXAMPLE, response_only=True),
            OpenApiExample("Not granted", value={"code": "ForbiddenUserError", "message":
                           "User alice is not allowed to access team-a-scratch."}, response_only=True,
                           status_codes=["403"]),
        ],
    )
    def get(self, request, name):
        storage = _usable_storages(request.user).select_related("server").filter(name=name).first()
        if storage is None:
            if StorageConfig.objects.visible_to(request.user).filter(name=name).exists():
                raise ForbiddenError(f"User {request.user.username} is not allowed to access {name}.")
            raise NoStorageError(f"Storage {name} is not found.")
        return Response(s.present_detail(storage, storage.pk in _default_ids(request.user)))
