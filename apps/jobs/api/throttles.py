"""Per-user rate limits on job submission and listing: bursts per second, so that a sweep of
a few hundred jobs in a minute goes through and a runaway script does not.

The site's rates come from the settings `PAI_THROTTLE_JOB_SUBMIT` and
`PAI_THROTTLE_JOB_LIST`, read on each request so that overriding them takes effect at once.
A tenant may have rates of its own (`Tenant.job_submit_rate`, `job_list_rate`, set by
platform admins); a member of several teams gets the most generous.
"""

from django.conf import settings
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.throttling import UserRateThrottle

from apps.accounts.roles import member_tenant_ids
from apps.tenants.models import Tenant

# {tenant id: {scope: rate}} of the tenants with rates of their own; usually empty, so a
# request costs no query. Cleared whenever a tenant changes.
OVERRIDES_KEY = "pai:throttle-overrides"
_FIELDS = {"job_submit": "job_submit_rate", "job_list": "job_list_rate"}


def tenant_rates():
    overrides = cache.get(OVERRIDES_KEY)
    if overrides is None:
        overrides = {}
        rows = Tenant.objects.exclude(job_submit_rate="", job_list_rate="").values_list(
            "pk", "job_submit_rate", "job_list_rate"
        )
        for pk, submit, listing in rows:
            overrides[pk] = {scope: rate for scope, rate in (("job_submit", submit), ("job_list", listing)) if rate}
        cache.set(OVERRIDES_KEY, overrides, None)
    return overrides


@receiver([post_save, post_delete], sender=Tenant, dispatch_uid="jobs.throttle_overrides")
def _forget_tenant_rates(**kwargs):
    cache.delete(OVERRIDES_KEY)


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
