"""Each user's time zone: pages show times in it.

The zone is a preference on the user's profile (`UserProfile.time_zone`, empty for the
platform's `TIME_ZONE`), copied into the session when the user signs in or changes it, so
that `UserTimeZoneMiddleware` activates it on every page without a query. Templates then
render every datetime in the viewer's zone (`{{ t|date:"… T" }}` names it).
"""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

SESSION_KEY = "pai_time_zone"


def zone_of(user):
    """The user's chosen zone name, or "" for the platform's."""
    from .models import UserProfile

    if user is None or not user.is_authenticated:
        return ""
    return UserProfile.objects.filter(user=user).values_list("time_zone", flat=True).first() or ""


def remember(request, name):
    if hasattr(request, "session"):
        request.session[SESSION_KEY] = name or ""


def set_zone(request, user, name):
    """Store the preference and use it from this request on."""
    from apps.audit.services import record

    from .models import UserProfile

    profile, _ = UserProfile.objects.get_or_create(user=user)
    before = profile.time_zone
    profile.time_zone = name or ""
    profile.full_clean(exclude=["user", "extension"])
    profile.save(update_fields=["time_zone"])
    if before != profile.time_zone:
        record(user, "user.time_zone", user, changes={"time_zone": [before, profile.time_zone]})
    remember(request, profile.time_zone)
    activate(profile.time_zone)


def activate(name):
    if not name:
        timezone.deactivate()
        return
    try:
        timezone.activate(ZoneInfo(name))
    except (ZoneInfoNotFoundError, ValueError):
        timezone.deactivate()


class UserTimeZoneMiddleware:
    """Activates the signed-in user's zone (from the session) for the request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        activate(session.get(SESSION_KEY, "") if session is not None else "")
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
