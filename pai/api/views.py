"""What every API view of pai shares."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError
from django.http import HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from .errors import ConflictError, NotFoundError


class ServiceErrorsMixin:
    """Services' validation errors become 400s naming the field; conflicts become 409s.

    Services raise Django's `ValidationError` (they serve the admin too). A unique
    constraint lost to a concurrent request, or a delete refused because rows still use
    the object, becomes a 409 named by `conflict_error`.
    """

    conflict_error = ConflictError

    def handle_exception(self, exc):
        if isinstance(exc, DjangoValidationError):
            detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
            if "__all__" in detail:  # model-wide checks (unique together...) name their fields in the text
                detail = {("non_field_errors" if k == "__all__" else k): v for k, v in detail.items()}
            exc = serializers.ValidationError(detail)
        elif isinstance(exc, ProtectedError):  # an IntegrityError too: test it first
            names = ", ".join(sorted({str(obj) for obj in exc.protected_objects})[:5])
            exc = self.conflict_error(f"Still in use by {names}.")
        elif isinstance(exc, IntegrityError):
            exc = self.conflict_error(str(exc).splitlines()[0] if str(exc) else "The object already exists.")
        return super().handle_exception(exc)


class ApiView(ServiceErrorsMixin, APIView):
    pass


class MessageSerializer(serializers.Serializer):
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="OpenPAI's error name, e.g. NoUserError.")
    message = serializers.CharField()


def message(text):
    return {"message": text}


PAGE_PARAMETERS = [
    OpenApiParameter("limit", OpenApiTypes.INT, description="pai extension: at most this many items (1-1000)."),
    OpenApiParameter("offset", OpenApiTypes.INT, description="pai extension: skip this many items."),
]
MAX_PAGE = 1000


def openpai_page(request, queryset):
    """Page an OpenPAI list, which stays a bare array as OpenPAI clients expect.

    Without `limit`/`offset` the whole list comes back, as in OpenPAI. With them (a pai
    extension) the slice comes back and the `X-Total-Count` header tells the total.
    Returns (rows, headers).
    """
    params = request.query_params
    if "limit" not in params and "offset" not in params:
        return queryset, {}
    values = {}
    for name, default, low, high in (("limit", MAX_PAGE, 1, MAX_PAGE), ("offset", 0, 0, None)):
        raw = params.get(name, str(default))
        if not raw.isdigit() or int(raw) < low or (high is not None and int(raw) > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise serializers.ValidationError({name: f"Must be an integer {bounds}."})
        values[name] = int(raw)
    total = queryset.count()
    return queryset[values["offset"]: values["offset"] + values["limit"]], {"X-Total-Count": str(total)}


class UnknownRouteView(APIView):
    """Any path under /api/ that no route matches: OpenPAI's JSON error, never an HTML page."""

    authentication_classes = []
    permission_classes = [AllowAny]

    def _not_found(self, request, *args, **kwargs):
        if request.method in ("GET", "HEAD") and not request.path_info.endswith("/"):
            # What APPEND_SLASH did before this catch-all matched everything: /api/docs → /api/docs/.
            try:
                match = resolve(request.path_info + "/")
            except Resolver404:
                match = None
            if match is not None and match.url_name != "api-unknown-route":
                query = request.META.get("QUERY_STRING", "")
                return HttpResponsePermanentRedirect(request.path + "/" + (f"?{query}" if query else ""))
        raise NotFoundError(f"{request.method} {request.path} is not a route of this API.")

    get = post = put = patch = delete = head = options = _not_found
