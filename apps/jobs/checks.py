"""System checks of the jobs app (printed when `runserver` and `manage.py check` start)."""

from django.conf import settings
from django.core import checks
from django.core.exceptions import ValidationError

from scheduler.backends.local import sandbox

HINT = (
    "Run the worker as root with bubblewrap installed (`make system-deps`), or set PAI_LOCAL_SANDBOX "
    "(README, \"The local backend's sandbox\")."
)


@checks.register(checks.Tags.security)
def check_local_sandbox(app_configs=None, **kwargs):
    """Say at start what the local backend can isolate, where it is the embedded default."""
    if settings.PAI_BACKEND != "local":
        return []
    mode = settings.PAI_LOCAL_SANDBOX
    if mode == "off":
        message = (
            "PAI_LOCAL_SANDBOX=off: the local backend runs every tenant's tasks unsandboxed as pai's own user; "
            "they can read each other's secrets, logs and storage, and pai's data directory."
        )
        if settings.PRODUCTION:
            return [checks.Error(message, hint=HINT, id="jobs.E002")]
        return [checks.Warning(message, hint=HINT, id="jobs.W002")]
    if mode == "single-tenant":
        return [checks.Warning(
            "PAI_LOCAL_SANDBOX=single-tenant: the local backend runs tasks unsandboxed, so it runs the jobs of "
            "one tenant only (the first to run a task).", hint=HINT, id="jobs.W001",
        )]
    found = sandbox.probe()
    if not isinstance(found, str):
        return []
    if mode == "required":
        return [checks.Error(
            f"PAI_LOCAL_SANDBOX=required, but the local backend cannot sandbox tasks here: {found}. "
            "It runs no task.", hint=HINT, id="jobs.E001",
        )]
    return [checks.Warning(
        f"The local backend cannot sandbox tasks here: {found}. It runs the jobs of one tenant only "
        "(the first to run a task); other tenants' jobs fail saying why.", hint=HINT, id="jobs.W001",
    )]


@checks.register()
def check_throttle_rates(app_configs=None, **kwargs):
    """The site's rates read as tenants' do (`N/period[ burst B]`): a typo fails the start,
    not every request it would limit."""
    from apps.tenants.models import rate_validator

    errors = []
    for name in ("PAI_THROTTLE_API", "PAI_THROTTLE_JOB_SUBMIT", "PAI_THROTTLE_JOB_LIST"):
        value = getattr(settings, name)
        if value is None:
            continue
        try:
            rate_validator(value)
        except ValidationError:
            errors.append(checks.Error(
                f"{name}={value!r}: {rate_validator.message}", id="jobs.E003",
            ))
            continue
        if name == "PAI_THROTTLE_API" and "burst" in value:
            # The API-wide limit counts requests in a sliding window of the period: a burst
            # would be ignored without a word.
            errors.append(checks.Error(
                f"{name}={value!r}: the API-wide rate takes no burst (only the job rates do); "
                f"write it as N/period, such as 50/second.", id="jobs.E003",
            ))
    return errors
