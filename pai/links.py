"""Absolute links to pai's own pages, for e-mails and chat messages read outside the browser."""

from django.conf import settings

# Where `make run` serves pai: the address of last resort in development, for messages
# sent with no request to learn the address from (the worker's).
DEVELOPMENT_URL = "http://127.0.0.1:8000"


def public_url(request=None):
    """pai's address as users reach it, without a trailing slash.

    `PAI_PUBLIC_URL` when set (production requires it); otherwise, in development, the
    address of the request being answered, so that links work wherever pai is served.
    """
    if settings.PAI_PUBLIC_URL:
        return settings.PAI_PUBLIC_URL.rstrip("/")
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return DEVELOPMENT_URL


def absolute(path, base=None):
    """`path` (starting with '/') under `base` (default: `public_url()`)."""
    return (base or public_url()) + path
