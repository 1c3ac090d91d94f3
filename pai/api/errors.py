"""OpenPAI's error bodies: `{"code": "<ErrorName>", "message": "..."}` for every API error.

Views raise `ApiError` subclasses (or DRF's own exceptions); the handler renders both in
OpenPAI's shape, so clients written for OpenPAI read pai's errors unchanged.
"""

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response


class ApiError(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    code = "InvalidParametersError"  # OpenPAI's name for any bad input

    def __init__(self, message, *, code=None, status_code=None):
        super().__init__(detail=message)
        self.message = message
        if code:
            self.code = code
        if status_code:
            self.status_code = status_code


class NotFoundError(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    code = "NotFoundError"


class ForbiddenError(ApiError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "ForbiddenUserError"


class ConflictError(ApiError):
    status_code = status.HTTP_409_CONFLICT
    code = "ConflictError"


class PayloadTooLargeError(ApiError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    code = "PayloadTooLargeError"


# OpenPAI's named errors (its swagger's `Response.code` enum), with OpenPAI's statuses.
class IncorrectPasswordError(ApiError):
    code = "IncorrectPasswordError"


class NoApiError(NotFoundError):
    code = "NoApiError"


class NoUserError(NotFoundError):
    code = "NoUserError"


class NoGroupError(NotFoundError):
    code = "NoGroupError"


class NoVirtualClusterError(NotFoundError):
    code = "NoVirtualClusterError"


class NoStorageError(NotFoundError):
    code = "NoStorageError"


class ConflictUserError(ConflictError):
    code = "ConflictUserError"


class ConflictGroupError(ConflictError):
    code = "ConflictGroupError"


class RemoveAdminError(ForbiddenError):
    code = "RemoveAdminError"


# DRF's exceptions, named as OpenPAI names them.
_CODES = {
    exceptions.NotAuthenticated: "UnauthorizedUserError",
    exceptions.AuthenticationFailed: "UnauthorizedUserError",
    exceptions.PermissionDenied: "ForbiddenUserError",
    exceptions.NotFound: "NotFoundError",
    exceptions.MethodNotAllowed: "MethodNotAllowedError",
    exceptions.NotAcceptable: "NotAcceptableError",
    exceptions.UnsupportedMediaType: "UnsupportedMediaTypeError",
    exceptions.Throttled: "TooManyRequestsError",
    exceptions.ParseError: "InvalidParametersError",
    exceptions.ValidationError: "InvalidParametersError",
}


def flatten_errors(detail, prefix=""):
    """DRF's nested error detail as `path: message` lines, so every message names its field."""
    if isinstance(detail, dict):
        lines = []
        for key, value in detail.items():
            if isinstance(key, int):  # a list field's errors, by the index of the bad items
                lines += flatten_errors(value, f"{prefix}[{key}]")
                continue
            path = key if key != "non_field_errors" else ""
            lines += flatten_errors(value, f"{prefix}.{path}" if prefix and path else (path or prefix))
        return lines
    if isinstance(detail, list):
        lines = []
        for index, value in enumerate(detail):
            nested = isinstance(value, (dict, list))
            lines += flatten_errors(value, f"{prefix}[{index}]" if nested else prefix)
        return lines
    return [f"{prefix}: {detail}" if prefix else str(detail)]


def exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        # Django's own body limit (DATA_UPLOAD_MAX_MEMORY_SIZE), met by a parser outside pai's.
        exc = PayloadTooLargeError(str(exc))
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ParseError(str(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "Permission denied.")
    # Imported here: rest_framework.views loads the default parsers, which use this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        code, message = exc.code, exc.message
    else:
        code = next((name for cls, name in _CODES.items() if isinstance(exc, cls)), "InternalServerError")
        message = "; ".join(flatten_errors(exc.detail))
    body = {"code": code, "message": message}
    if isinstance(exc, exceptions.ValidationError) and isinstance(exc.detail, dict):
        body["errors"] = exc.detail
    headers = {k: v for k, v in response.items() if k in ("Retry-After", "WWW-Authenticate", "Allow")}
    return Response(body, status=response.status_code, headers=headers)
