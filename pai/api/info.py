"""`GET /api/v2/info`: what this server is and how users log in."""

from importlib.metadata import PackageNotFoundError, version

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from .views import ApiView


class InfoSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    launcherType = serializers.ChoiceField(choices=["k8s"])
    authnMethod = serializers.ChoiceField(choices=["basic", "OIDC"])


class InfoView(ApiView):
    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(
        tags=["api"],
        operation_id="getClusterInfo",
        summary="What this server is and how users log in.",
        responses={200: InfoSerializer},
        examples=[OpenApiExample("Info", response_only=True, value={
            "name": "pai", "version": "v0.1.0", "launcherType": "k8s", "authnMethod": "basic"})],
    )
    def get(self, request):
        try:
            release = version("pai")
        except PackageNotFoundError:
            release = "0.0.0"
        return Response({
            "name": "pai",
            "version": f"v{release}",
            "launcherType": "k8s",
            "authnMethod": "OIDC" if settings.PAI_AUTH_MODE == "oidc" else "basic",
        })
