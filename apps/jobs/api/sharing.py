"""pai-native: who a job is shared with, read-only (`/api/v2/jobs/{user}~{job}/shares`).

The owner, the admins of the job's tenant and platform admins read and replace the list;
users it is shared with get 403 (a share is read-only), everyone else 404: the managers
of a job (`_job(..., manage=True)`) are exactly those who may share it.
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models.functions import Lower
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import sharing

from ..errors import InvalidParametersError
from .views import _ERRORS, _JOB_PARAMETERS, _job


class JobSharesSerializer(serializers.Serializer):
    users = serializers.ListField(child=serializers.CharField(max_length=150), max_length=1000,
                                  help_text="Usernames who may read the job: detail, config, events, logs.")


class JobSharesView(APIView):
    @extend_schema(
        operation_id="getJobShares", tags=["job"], summary="Users a job is shared with (read-only)",
        parameters=_JOB_PARAMETERS,
        responses={200: JobSharesSerializer, 403: _ERRORS[403], 404: _ERRORS[404]},
    )
    def get(self, request, username, name):
        job = _job(request, username, name, manage=True)
        users = sorted(job.user_shares.filter(permission__codename="view_job").values_list("user__username", flat=True))
        return Response({"users": users})

    @extend_schema(
        operation_id="setJobShares", tags=["job"], summary="Share a job read-only with exactly these users",
        parameters=_JOB_PARAMETERS, request=JobSharesSerializer,
        responses={200: JobSharesSerializer, 400: _ERRORS[400], 403: _ERRORS[403], 404: _ERRORS[404]},
        examples=[OpenApiExample("share", value={"users": ["bob"]}, request_only=True)],
    )
    def put(self, request, username, name):
        job = _job(request, username, name, manage=True)
        data = JobSharesSerializer(data=request.data)
        if not data.is_valid():
            raise InvalidParametersError(f"users: {data.errors.get('users', data.errors)}")
        # Usernames are unique whatever their case, and looked up so.
        names = set(data.validated_data["users"])
        users = list(get_user_model().objects.annotate(folded=Lower("username"))
                     .filter(folded__in={n.lower() for n in names}, is_active=True))
        found = {u.get_username().lower() for u in users}
        unknown = sorted(n for n in names if n.lower() not in found)
        if unknown:
            raise InvalidParametersError(f"users: no active user named {', '.join(unknown)}")
        try:
            shared = sharing.set_user_shares(request.user, job, users)
        except DjangoValidationError as exc:
            raise InvalidParametersError("; ".join(exc.messages)) from None
        return Response({"users": shared})
