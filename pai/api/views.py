"""What every API view of pai shares."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from rest_framework import serializers
from rest_framework.views import APIView

from .errors import ConflictError


class ApiView(APIView):
    """An APIView whose services' validation errors become 400s naming the field.

    Services raise Django's `ValidationError` (they serve the admin too); a unique
    constraint lost to a concurrent request becomes a 409 named by `conflict_error`.
    """

    conflict_error = ConflictError

    def handle_exception(self, exc):
        if isinstance(exc, DjangoValidationError):
            detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
            exc = serializers.ValidationError(detail)
        elif isinstance(exc, IntegrityError):
            exc = self.conflict_error(str(exc).splitlines()[0] if str(exc) else "The object already exists.")
        return super().handle_exception(exc)


class MessageSerializer(serializers.Serializer):
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="OpenPAI's error name, e.g. NoUserError.")
    message = serializers.CharField()


def message(text):
    return {"message": text}
