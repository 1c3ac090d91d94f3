"""Who sees which jobs.

- `visible_to(user)`: the job list. Owners see their jobs; members of a tenant see the
  jobs in its VCs as summaries (the VC's queue); platform admins see all.
- `readable_by(user)`: detail, config, attempts, events, logs. Owners, the admins of the
  job's tenant and platform admins. Other members of the tenant see summaries only.
- `manageable_by(user)`: stop and tag; the same people as `readable_by`.

The part models (attempts, tasks, task attempts, events, tags, secrets) scope through
their job with the same rules, via `job_path`.
"""

from django.db import models

from apps.accounts.roles import admin_tenant_ids, is_platform_admin, member_tenant_ids


class _JobScopedQuerySet(models.QuerySet):
    job_path = ""

    def _field(self, name):
        return f"{self.job_path}__{name}" if self.job_path else name

    def visible_to(self, user):
        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(
            models.Q(**{self._field("owner"): user}) | models.Q(**{self._field("tenant__in"): member_tenant_ids(user)})
        )

    def readable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(
            models.Q(**{self._field("owner"): user}) | models.Q(**{self._field("tenant__in"): admin_tenant_ids(user)})
        )

    def manageable_by(self, user):
        return self.readable_by(user)


class JobQuerySet(_JobScopedQuerySet):
    def holding_cells(self):
        """Jobs whose cells are taken: running, or waiting with a placement (pods starting)."""
        from .choices import JobState

        return self.filter(
            models.Q(state=JobState.RUNNING) | models.Q(state=JobState.WAITING, placement__isnull=False)
        )


def is_readable(job, user):
    """`readable_by` for one loaded job, without a query beyond the cached role lookups."""
    if is_platform_admin(user):
        return True
    return job.owner_id == user.pk or job.tenant_id in admin_tenant_ids(user)


class JobPartQuerySet(_JobScopedQuerySet):
    job_path = "job"


class TaskQuerySet(_JobScopedQuerySet):
    job_path = "job_attempt__job"


class TaskAttemptQuerySet(_JobScopedQuerySet):
    job_path = "task__job_attempt__job"
