"""Request body parsers that read at most a bounded number of bytes.

DRF's parsers read the whole body into memory whatever its size; these refuse a body
over the limit with 413 before reading it when it announces its length, and stop
reading one byte past the limit otherwise. The default limit is Django's own for form
bodies (`DATA_UPLOAD_MAX_MEMORY_SIZE`); a view may set a smaller one (job submission).
JSON bodies are also bounded in nesting (`pai.documents`), so that no view meets a
RecursionError.
"""

from django.conf import settings
from django.http import QueryDict
from rest_framework import renderers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, get_encoding

from pai.documents import DocumentError, load_json

from .errors import PayloadTooLargeError


def read_bounded(stream, limit, parser_context, what="The request body"):
    """The body's bytes, or PayloadTooLargeError when it is longer than `limit`."""
    request = (parser_context or {}).get("request")
    meta = request.META if request is not None else {}
    try:
        announced = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        announced = 0
    if announced > limit:
        raise PayloadTooLargeError(f"{what} is {announced} bytes; the limit is {limit} bytes.")
    body = stream.read(limit + 1) if stream is not None else b""
    if len(body) > limit:
        raise PayloadTooLargeError(f"{what} is more than {limit} bytes; the limit is {limit} bytes.")
    return body


class BoundedParser(BaseParser):
    def limit(self):
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def read(self, stream, parser_context):
        return read_bounded(stream, self.limit(), parser_context)


class JSONParser(BoundedParser):
    media_type = "application/json"
    renderer_class = renderers.JSONRenderer

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        body = self.read(stream, parser_context)
        try:
            return load_json(body.decode(get_encoding(parser_context)))
        except DocumentError as exc:
            raise ParseError(f"JSON parse error - the body {exc}") from None
        except ValueError as exc:  # also UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None


class FormParser(BoundedParser):
    media_type = "application/x-www-form-urlencoded"

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        return QueryDict(self.read(stream, parser_context), encoding=get_encoding(parser_context))
