"""Secrets at rest and the security headers of HTML pages.

Secrets: values that must never be readable from a database dump (job secrets, registry
credentials) are stored as Fernet tokens under the keys of `PAI_SECRETS_KEY` (a
comma-separated list: the first encrypts, all decrypt, so a key is rotated by putting
the new one first and re-saving the rows).

Headers: HTML pages get a Content-Security-Policy that loads scripts only from pai
itself or from inline `<script nonce="{{ request.csp_nonce }}">` blocks the templates
mark. Inline styles stay allowed: the pages and the admin use style attributes, and a
style cannot run code.
"""

import contextvars
import functools
import json
import secrets

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import models


class SecretsKeyError(ImproperlyConfigured):
    """A stored secret cannot be decrypted with any key of PAI_SECRETS_KEY."""


@functools.lru_cache(maxsize=4)
def _box(keys):
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            "PAI_SECRETS_KEY must be a comma-separated list of Fernet keys (32 url-safe base64-encoded bytes each)"
        ) from exc


@checks.register(checks.Tags.security)
def check_secrets_keys(app_configs=None, **kwargs):
    try:
        secrets_box()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="pai.E001")]
    return []


def secrets_box():
    return _box(tuple(settings.PAI_SECRETS_KEYS))


def encrypt_json(value):
    return secrets_box().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def decrypt_json(token):
    try:
        plain = secrets_box().decrypt(token.encode())
    except InvalidToken as exc:
        raise SecretsKeyError("a stored secret cannot be decrypted with any key of PAI_SECRETS_KEY") from exc
    return json.loads(plain)


class EncryptedJSONField(models.TextField):
    """A JSON value kept encrypted in a text column; the model attribute holds the plain value.

    Not searchable or filterable by content, by design: the database never sees it.
    """

    description = "JSON, encrypted at rest"

    def from_db_value(self, value, expression, connection):
        return None if value is None else decrypt_json(value)

    def to_python(self, value):
        return value

    def get_prep_value(self, value):
        return None if value is None else encrypt_json(value)

    def value_to_string(self, obj):
        # Serialisation (dumpdata) writes the ciphertext, never the plain value.
        return self.get_prep_value(self.value_from_object(obj))


class ContentSecurityPolicyMiddleware:
    """A per-response nonce for the templates, and the policy header on HTML responses."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.csp_nonce = secrets.token_urlsafe(16)
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy(request.csp_nonce)
        return response


def policy(nonce):
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'nonce-{nonce}'",
            "style-src 'self' 'unsafe-inline'",
            # Swagger UI's stylesheet draws its icons as data: URIs.
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'self'",
            "frame-ancestors 'none'",
        ]
    )


def client_address(request):
    """The client's address: REMOTE_ADDR, or behind `PAI_TRUSTED_PROXY_COUNT` proxies (an
    ingress, a load balancer) the address the farthest of them saw, from X-Forwarded-For.
    Entries a client wrote itself sit further left and are never used."""
    if request is None:
        return ""
    address = request.META.get("REMOTE_ADDR", "")
    proxies = settings.PAI_TRUSTED_PROXY_COUNT
    if proxies:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            address = forwarded[-proxies]
    return address[:64]


_current_request = contextvars.ContextVar("pai_current_request", default=None)


def current_user():
    """The user of the request being served (None outside one): the actor of audit rows that
    signals write, where no service hands the actor over."""
    request = _current_request.get()
    user = getattr(request, "user", None) if request is not None else None
    return user if user is not None and user.is_authenticated else None


class CurrentRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reset = _current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            _current_request.reset(reset)
