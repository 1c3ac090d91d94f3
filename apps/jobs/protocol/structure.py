"""Loading a job document and checking it against the JSON Schema."""

import json
import math

import yaml
from django.conf import settings
from jsonschema import Draft202012Validator

from pai.documents import DocumentError, check_depth, load_yaml

from .errors import ProtocolError, ProtocolTooLargeError, at
from .schema import JOB_SCHEMA

_VALIDATOR = Draft202012Validator(JOB_SCHEMA)
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# Integers beyond what the database stores would fail on insert, not here.
_MAX_INT = 2**31 - 1


def load(body):
    """The job document from a YAML/JSON text or an already-decoded JSON object.

    A text longer than `PAI_JOB_PROTOCOL_MAX_BYTES` is refused unread; YAML aliases,
    nesting and the expanded size are bounded before the document is built
    (`pai.documents`).
    """
    if isinstance(body, (bytes, str)):
        size = len(body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body)
        if size > settings.PAI_JOB_PROTOCOL_MAX_BYTES:
            raise ProtocolTooLargeError(settings.PAI_JOB_PROTOCOL_MAX_BYTES, size)
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError([f"body: is not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if isinstance(body, str):
        try:
            document = load_yaml(body)
        except DocumentError as exc:
            raise ProtocolError([f"body: {exc}"]) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise ProtocolError([f"body: is not valid YAML{where}: {problem}"]) from None
    else:
        document = body
        try:
            check_depth(document)
        except DocumentError as exc:
            raise ProtocolError([f"body: {exc}"]) from None
    if not isinstance(document, dict):
        raise ProtocolError(["body: must be a map (the job document)"])
    # YAML may yield dates and non-string keys; the stored document is plain JSON.
    try:
        document = json.loads(json.dumps(document, default=str, allow_nan=False))
    except ValueError:
        raise ProtocolError(["body: numbers must be finite (no .nan or .inf)"]) from None
    errors = list(_unstorable(document, []))
    if errors:
        raise ProtocolError(errors)
    return document


def storable_text(text):
    """Whether the database can store `text`: no NUL characters, no lone surrogates."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unstorable(value, path):
    if isinstance(value, dict):
        for key, item in value.items():
            if not storable_text(key):
                yield at(path, "keys must be text without NUL characters or lone surrogates")
                continue
            yield from _unstorable(item, path + [key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unstorable(item, path + [index])
    elif isinstance(value, str) and not storable_text(value):
        yield at(path, "must be text without NUL characters or lone surrogates")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        yield at(path, f"must be between {-_MAX_INT} and {_MAX_INT}")
    elif isinstance(value, float) and not math.isfinite(value):
        yield at(path, "must be a finite number")


def check_structure(document):
    errors = []
    for error in sorted(_VALIDATOR.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]):
        errors.extend(_describe(error))
    if errors:
        raise ProtocolError(list(dict.fromkeys(errors)))


def _describe(error):
    path = list(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        present = error.instance if isinstance(error.instance, dict) else {}
        return [at(path + [key], "is required") for key in error.validator_value if key not in present]
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = set(schema.get("properties", {}))
        return [at(path + [key], "is not a field of the job protocol") for key in error.instance if key not in known]
    if "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad key at its map's path, with the key as the instance.
        return [at(path + [error.instance], schema.get("x-message", error.message))]
    if error.validator == "minItems" and "x-message" not in schema:
        return [at(path, f"must have at least {error.validator_value} item(s)")]
    return [at(path, schema.get("x-message", error.message))]
