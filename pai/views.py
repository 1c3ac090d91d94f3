from django.conf import settings
from django.db import connection
from django.http import JsonResponse


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Readiness: the database (and the broker when it is Redis) answer."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means not ready; say which
        checks["database"] = f"error: {exc.__class__.__name__}"
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"error: {exc.__class__.__name__}"
    ready = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
