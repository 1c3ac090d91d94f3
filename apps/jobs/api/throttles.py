"""Per-user rate limits on job submission and listing: bursts per second, so that a sweep of
a few hundred jobs in a minute goes through and a runaway script does not.

The site's rates come from the settings `PAI_THROTTLE_JOB_SUBMIT` and
`PAI_THROTTLE_JOB_LIST`, read on each request so that overriding them takes effect at once.
A tenant may have rates of its own (`Tenant.job_submit_rate`, `job_list_rate`, set by
platform admins); a member of several teams gets the most generous.
"""

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


class _TenantRateThrottle(UserRateThrottle):
    setting = None

    def get_rate(self):
        return getattr(settings, self.setting)

    def allow_request(self, request, view):
        rate = self._rate_for(request.user)
        if rate != self.rate:
            self.rate = rate
            self.num_requests, self.duration = self.parse_rate(rate)
        return super().allow_request(request, view)

    def _rate_for(self, user):
        default = self.get_rate()
        overrides = tenant_rates()
        if not overrides or not user.is_authenticated:
            return default
        rates = [overrides[t][self.scope] for t in member_tenant_ids(user) if self.scope in overrides.get(t, {})]
        return max(rates, key=self._per_second, default=default)

    def _per_second(self, rate):
        count, seconds = self.parse_rate(rate)
        return count / seconds


class JobSubmitThrottle(_TenantRateThrottle):
    scope = "job_submit"
    setting = "PAI_THROTTLE_JOB_SUBMIT"


class JobListThrottle(_TenantRateThrottle):
    scope = "job_list"
    setting = "PAI_THROTTLE_JOB_LIST"
