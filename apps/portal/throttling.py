"""The API's rate limits, applied to the portal's actions: every action counts against the
API-wide rate (`PAI_THROTTLE_API`), every job submitted — from the submit page, a re-submit or
a bulk clone — against the job submission rate (`PAI_THROTTLE_JOB_SUBMIT`), with the very
counters `POST /api/v2/jobs` uses, so the browser is no way around them."""

from django.shortcuts import render
from rest_framework.throttling import UserRateThrottle

from apps.jobs.api.throttles import JobSubmitThrottle


def wait_seconds(request, *throttles):
    """Seconds to wait when the user has gone past one of `throttles`, else None (and the
    request is counted by each throttle that let it through)."""
    for throttle in throttles:
        if not throttle.allow_request(request, None):
            return int(throttle.wait() or 0) + 1
    return None


def request_wait(request):
    """The API-wide rate: seconds to wait, or None."""
    return wait_seconds(request, UserRateThrottle())


def submission_wait(request):
    """One more job submitted: seconds to wait, or None."""
    return wait_seconds(request, JobSubmitThrottle())


def too_many(response, wait):
    response.status_code = 429
    response["Retry-After"] = str(wait)
    return response


def too_many_page(request, wait, what="requests"):
    """The portal's error page for a refused action: 429 with Retry-After."""
    return too_many(render(request, "portal/error.html", {
        "title": "Too many " + what, "message": f"Too many {what}: try again in {wait} second(s).",
    }), wait)
