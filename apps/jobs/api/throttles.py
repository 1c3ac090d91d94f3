"""Per-user rate limits on job submission and listing: a rate per second with a burst, so
that a sweep of a few hundred jobs goes through however fast its script sends them, and a
runaway script is held to the rate.

A rate reads `N/period`, optionally followed by ` burst B`: a member may send B requests at
once, then N per period (a token bucket, kept as GCRA's one timestamp per user in the
cache). Without a burst, B is N. The site's rates come from the settings
`PAI_THROTTLE_JOB_SUBMIT` and `PAI_THROTTLE_JOB_LIST`, read on each request so that
overriding them takes effect at once. A tenant may have rates of its own
(`Tenant.job_submit_rate`, `job_list_rate`, set by platform admins); a member of several
teams gets the most generous.
"""

import math
import re
import time

from django.conf import settings
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.throttling import UserRateThrottle

from apps.accounts.roles import member_tenant_ids
from apps.tenants.models import Tenant

# {tenant id: {scope: rate}} of the tenants with rates of their own; usually empty. Kept in
# the shared cache and in this process for a minute, so a request costs no query; rebuilt
# when a tenant changes here, and seen within the minute when it changes elsewhere.
OVERRIDES_KEY = "pai:throttle-overrides"
OVERRIDES_SECONDS = 60
_memo = {"overrides": None, "until": 0.0}


def _remember(overrides):
    _memo.update(overrides=overrides, until=time.monotonic() + OVERRIDES_SECONDS)
    return overrides


def _load_tenant_rates():
    overrides = {}
    rows = Tenant.objects.exclude(job_submit_rate="", job_list_rate="").values_list(
        "pk", "job_submit_rate", "job_list_rate"
    )
    for pk, submit, listing in rows:
        overrides[pk] = {scope: rate for scope, rate in (("job_submit", submit), ("job_list", listing)) if rate}
    cache.set(OVERRIDES_KEY, overrides, OVERRIDES_SECONDS)
    return _remember(overrides)


def tenant_rates():
    if _memo["overrides"] is not None and time.monotonic() < _memo["until"]:
        return _memo["overrides"]
    overrides = cache.get(OVERRIDES_KEY)
    return _load_tenant_rates() if overrides is None else _remember(overrides)


@receiver([post_save, post_delete], sender=Tenant, dispatch_uid="jobs.throttle_overrides")
def _reload_tenant_rates(**kwargs):
    _load_tenant_rates()


_RATE = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)(?:\s+burst\s+(\d+))?\s*$")
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate):
    """`N/period[ burst B]` as (N, period in seconds, B); None for no limit."""
    if rate is None:
        return None
    count, period, burst = _RATE.match(rate).groups()
    return int(count), _PERIODS[period[0]], int(burst or count)


class _TenantRateThrottle(UserRateThrottle):
    setting = None

    def get_rate(self):
        return getattr(settings, self.setting)

    def parse_rate(self, rate):
        parsed = parse_rate(rate)
        return (None, None) if parsed is None else parsed[:2]

    def allow_request(self, request, view):
        self.rate = self._rate_for(request.user)
        self.key = self.get_cache_key(request, view)
        if self.rate is None or self.key is None:
            return True
        count, period, burst = parse_rate(self.rate)
        # A bucket per rate: a changed rate applies at once, from a full burst.
        self.key = f"{self.key}:{count}-{period}-{burst}"
        # GCRA: `due` is when the bucket is full again; one more request may come while it
        # is at most burst - 1 intervals ahead of now (to within rounding).
        interval = period / count
        now = self.timer()
        due = self.cache.get(self.key)
        due = max(due, now) if isinstance(due, (int, float)) else now
        ahead = due - now - (burst - 1) * interval
        if ahead > interval * 1e-6:
            self._wait = ahead
            return False
        due += interval
        self.cache.set(self.key, due, math.ceil(due - now) + 1)
        return True

    def wait(self):
        return self._wait

    def _rate_for(self, user):
        default = self.get_rate()
        overrides = tenant_rates()
        if not overrides or not user.is_authenticated:
            return default
        rates = [overrides[t][self.scope] for t in member_tenant_ids(user) if self.scope in overrides.get(t, {})]
        return max(rates, key=self._per_second, default=default)

    @staticmethod
    def _per_second(rate):
        count, seconds, burst = parse_rate(rate)
        return count / seconds, burst


class JobSubmitThrottle(_TenantRateThrottle):
    scope = "job_submit"
    setting = "PAI_THROTTLE_JOB_SUBMIT"


class JobListThrottle(_TenantRateThrottle):
    scope = "job_list"
    setting = "PAI_THROTTLE_JOB_LIST"
