from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pai.api.errors import ApiError

from ..reports import DIMENSIONS, ReportError, parse_request, report_csv, usage_report


class InvalidReportError(ApiError):
    code = "InvalidParametersError"


_PARAMETERS = [
    OpenApiParameter("group_by", str, description=f"Comma-separated, from: {', '.join(DIMENSIONS)} "
                     "(default tenant,vc,month)."),
    OpenApiParameter("from", str, description="First month, YYYY-MM."),
    OpenApiParameter("to", str, description="Last month, YYYY-MM."),
    OpenApiParameter("tenant", str, description="A tenant's slug."),
    OpenApiParameter("vc", str, description="A virtual cluster's name."),
    OpenApiParameter("user", str, description="A user name."),
    OpenApiParameter("running", OpenApiTypes.BOOL, description="Add what running jobs used so far (default true)."),
    OpenApiParameter("output", str, enum=["json", "csv"], description="csv: the same rows as a CSV file."),
]


@extend_schema(
    tags=["usage"],
    parameters=_PARAMETERS,
    responses=inline_serializer("UsageRow", {
        **{name: serializers.CharField(required=False) for name in DIMENSIONS},
        "gpu_hours": serializers.FloatField(), "cpu_hours": serializers.FloatField(),
    }, many=True),
)
class UsageReportView(APIView):
    """GPU-hours and CPU-hours per tenant, VC, user, SKU and month, from the usage ledger
    (kept after jobs are deleted) plus running jobs so far. Platform admins see every
    tenant, team admins their tenants, members their own jobs."""

    def get(self, request):
        try:
            report = parse_request(request.query_params)
        except ReportError as exc:
            raise InvalidReportError(str(exc)) from None
        rows = usage_report(request.user, report)
        if request.query_params.get("output") == "csv":
            response = HttpResponse(report_csv(report, rows), content_type="text/csv")
            response["Content-Disposition"] = 'attachment; filename="pai-usage.csv"'
            return response
        return Response(rows)
