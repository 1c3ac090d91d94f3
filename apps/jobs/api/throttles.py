"""Per-user rate limits on job submission and listing (OpenPAI's defaults).

Rates come from the settings `PAI_THROTTLE_JOB_SUBMIT` and `PAI_THROTTLE_JOB_LIST`, read
on each request so that overriding them takes effect at once.
"""

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class _SettingRateThrottle(UserRateThrottle):
    setting = None
    default_rate = None

    def get_rate(self):
        return getattr(settings, self.setting, self.default_rate)


class JobSubmitThrottle(_SettingRateThrottle):
    scope = "job_submit"
    setting = "PAI_THROTTLE_JOB_SUBMIT"
    default_rate = "60/hour"


class JobListThrottle(_SettingRateThrottle):
    scope = "job_list"
    setting = "PAI_THROTTLE_JOB_LIST"
    default_rate = "60/min"
