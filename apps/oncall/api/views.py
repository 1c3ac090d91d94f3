import hmac
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from pai.api.errors import ApiError, ConflictError, ForbiddenError

from .. import services
from ..filters import IncidentFilter
from ..models import Incident, Rotation
from . import serializers as s


@contextmanager
def service_errors():
    """Service exceptions as API errors: bad input 400, not allowed 403, wrong state 409."""
    try:
        yield
    except ValidationError as exc:
        raise serializers.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages) from None
    except PermissionDenied as exc:
        raise ForbiddenError(str(exc) or "Permission denied.") from None
    except services.TransitionRefused as exc:
        raise ConflictError(str(exc), code="IncidentStateError") from None


@extend_schema(tags=["incidents"])
class IncidentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Incidents: DRIs and platform admins see all, other users the ones they reported or are assigned."""

    filterset_class = IncidentFilter
    serializer_class = s.IncidentSerializer

    def get_queryset(self):
        queryset = (
            Incident.objects.visible_to(self.request.user)
            .select_related("cluster", "reporter", "acknowledged_by", "rotation")
            .prefetch_related("assignees")
        )
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("timeline", "follow_ups__owner")
        return queryset

    def get_serializer_class(self):
        if self.action == "retrieve":
            return s.IncidentDetailSerializer
        return s.IncidentSerializer

    def _respond(self, incident, code=status.HTTP_200_OK):
        incident = self.get_queryset().prefetch_related("timeline", "follow_ups__owner").get(pk=incident.pk)
        return Response(s.IncidentDetailSerializer(incident).data, status=code)

    @extend_schema(request=s.IncidentCreateSerializer, responses={201: s.IncidentDetailSerializer},
                   description="Open an incident. A user's severity is a proposal a DRI confirms; a DRI's stands.")
    def create(self, request, *args, **kwargs):
        data = s.IncidentCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with service_errors():
            incident = services.report_incident(request.user, **data.validated_data)
        return self._respond(incident, status.HTTP_201_CREATED)

    def _act(self, request, fn, serializer_class=None, *, responders_only=False, **extra):
        incident = self.get_object()
        with service_errors():
            services.check_may_act(incident, request.user, responders_only=responders_only)
        kwargs = dict(extra)
        if serializer_class is not None:
            data = serializer_class(data=request.data)
            data.is_valid(raise_exception=True)
            kwargs.update(data.validated_data)
        with service_errors():
            fn(incident, request.user, **kwargs)
        return self._respond(incident)

    @extend_schema(request=None, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        return self._act(request, services.acknowledge)

    @extend_schema(request=s.IncidentUpdateSerializer, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"], url_path="update")
    def post_update(self, request, pk=None):
        return self._act(request, services.post_update, s.IncidentUpdateSerializer)

    @extend_schema(request=s.IncidentNoteSerializer, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def mitigate(self, request, pk=None):
        return self._act(request, services.mitigate, s.IncidentNoteSerializer)

    @extend_schema(request=s.IncidentNoteSerializer, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request, pk=None):
        return self._act(request, services.resolve, s.IncidentNoteSerializer)

    @extend_schema(request=s.IncidentReviewSerializer, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def review(self, request, pk=None):
        return self._act(request, services.record_review, s.IncidentReviewSerializer)

    @extend_schema(request=None, responses=s.IncidentDetailSerializer, description="Close: the review is done.")
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        return self._act(request, services.close)

    @extend_schema(request=s.SeverityConfirmSerializer, responses=s.IncidentDetailSerializer)
    @action(detail=True, methods=["post"], url_path="confirm-severity")
    def confirm_severity(self, request, pk=None):
        return self._act(request, services.confirm_severity, s.SeverityConfirmSerializer, responders_only=True)


@extend_schema(tags=["rotations"])
class RotationViewSet(viewsets.ReadOnlyModelViewSet):
    """On-call rotations: the platform's (visible to everyone) and your teams'."""

    serializer_class = s.RotationSerializer

    def get_queryset(self):
        return Rotation.objects.visible_to(self.request.user).select_related("tenant").prefetch_related("members__user")

    @extend_schema(
        parameters=[OpenApiParameter("count", int, description="How many shifts (default 8, at most 104).")],
        responses=s.ShiftSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def shifts(self, request, pk=None):
        try:
            count = int(request.query_params.get("count", 8))
        except ValueError:
            raise ApiError("count: expected a whole number.") from None
        if not 1 <= count <= 104:
            raise ApiError("count: between 1 and 104.")
        return Response(s.ShiftSerializer(services.upcoming_shifts(self.get_object(), count), many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("days", int, description="The period: the last N days (default 90, at most 730).")],
        responses=s.FairShareSerializer(many=True),
    )
    @action(detail=True, methods=["get"], url_path="fair-share")
    def fair_share(self, request, pk=None):
        try:
            days = int(request.query_params.get("days", 90))
        except ValueError:
            raise ApiError("days: expected a whole number.") from None
        if not 1 <= days <= 730:
            raise ApiError("days: between 1 and 730.")
        end = timezone.now()
        rows = services.fair_share(self.get_object(), end - timedelta(days=days), end)
        data = [{"username": user.get_username(), "shifts": shifts, "hours": hours} for user, shifts, hours in rows]
        return Response(s.FairShareSerializer(data, many=True).data)

    @extend_schema(request=s.OverrideSerializer, responses={201: s.OverrideReadSerializer},
                   description="Someone covers for a scheduled DRI over a time range.")
    @action(detail=True, methods=["post"])
    def overrides(self, request, pk=None):
        data = s.OverrideSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with service_errors():
            override = services.add_override(self.get_object(), request.user, **data.validated_data)
        return Response(s.OverrideReadSerializer(override).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.SwapSerializer, responses={201: s.OverrideReadSerializer(many=True)},
                   description="Two members trade whole shifts (recorded as two overrides).")
    @action(detail=True, methods=["post"])
    def swap(self, request, pk=None):
        data = s.SwapSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with service_errors():
            overrides = services.swap_shifts(self.get_object(), request.user, **data.validated_data)
        return Response(s.OverrideReadSerializer(overrides, many=True).data, status=status.HTTP_201_CREATED)


@extend_schema(
    tags=["rotations"],
    parameters=[OpenApiParameter("at", str, description="An ISO 8601 time (default: now), e.g. 2027-01-04T09:00:00Z.")],
    responses=s.OnCallNowSerializer(many=True),
)
class OnCallNowView(APIView):
    """Who is on call now (or at `?at=`), per visible rotation."""

    def get(self, request):
        at = None
        if request.query_params.get("at"):
            at = parse_datetime(request.query_params["at"])
            if at is None:
                raise ApiError("at: expected an ISO 8601 date and time.")
            if timezone.is_naive(at):
                at = timezone.make_aware(at)
        rows = services.on_call(at, Rotation.objects.visible_to(request.user).select_related("tenant"))
        data = [
            {"rotation": rotation.name, "tenant": rotation.tenant.slug if rotation.tenant else None, "dris": users}
            for rotation, users in rows
        ]
        return Response(s.OnCallNowSerializer(data, many=True).data)


@extend_schema(tags=["alerts"], responses=s.AlertSerializer(many=True))
class AlertListView(APIView):
    """OpenPAI's `GET /api/v2/alerts`: firing alerts; users see only those about their own jobs."""

    def get(self, request):
        return Response(s.AlertSerializer(services.firing_alerts_for(request.user), many=True).data)


@extend_schema(
    tags=["alerts"],
    request={"application/json": {"type": "object", "description": "Alertmanager's webhook payload (version 4)."}},
    responses=s.WebhookResultSerializer,
    description="Alertmanager webhook receiver. Authenticate with `Authorization: Bearer $PAI_ALERTMANAGER_TOKEN`. "
    "Alerts of one Alertmanager group (its groupKey) join one open incident. An alert that cannot be kept (a NUL "
    "character in a label, a bad status or time) is left out and named in `rejected`; the others are kept (200), "
    "so that Alertmanager does not retry the delivery. A delivery with no usable alert is a 400.",
)
class AlertWebhookView(APIView):
    # The shared secret below authenticates Alertmanager; a big outage may deliver many
    # groups at once from one address, which the per-client rate limit must not drop.
    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []

    def post(self, request):
        token = settings.PAI_ALERTMANAGER_TOKEN
        if not token:
            raise ForbiddenError("Alert intake is disabled: set PAI_ALERTMANAGER_TOKEN.")
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise ApiError("Missing or wrong bearer token.", code="UnauthorizedUserError", status_code=401)
        with service_errors():
            delivery, rejected = services.split_alertmanager_delivery(request.data)
            incident = services.ingest_alertmanager(delivery)
        # The good alerts are kept and the delivery answered 200, so that Alertmanager does not
        # send it again; the alerts that could not be stored are named.
        return Response({
            "incident": incident.pk if incident else None, "status": incident.status if incident else None,
            "rejected": rejected,
        })
