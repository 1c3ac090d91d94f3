import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from .metrics import exposition


@require_GET
def metrics(request):
    """Prometheus' scrape endpoint. With `PAI_METRICS_TOKEN` set it asks for
    `Authorization: Bearer <token>`; in production it is closed until a token is set."""
    token = settings.PAI_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            response = HttpResponse("a bearer token (PAI_METRICS_TOKEN) is required\n", status=401,
                                    content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif settings.PRODUCTION:
        return HttpResponse("metrics are closed: set PAI_METRICS_TOKEN\n", status=403, content_type="text/plain")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
