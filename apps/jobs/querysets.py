"""Who sees which jobs.

- `visible_to(user)`: the job list. Owners see their jobs; members of a tenant see the
  jobs in its VCs as summaries (the VC's queue); platform admins see all.
- `readable_by(user)`: detail, config, attempts, events, logs. Owners, the admins of the
  job's tenant, platform admins, and users the job is shared with (`apps.accounts.sharing`).
  Other members of the tenant see summaries only. Shared jobs are listed to their readers.
- `manageable_by(user)`: stop and tag; owners, the job's tenant admins, platform admins
  (a share is read-only).

The part models (attempts, tasks, task attempts, events, tags, secrets) scope through
their job with the same rules, via `job_path`.
"""

from django.db import models

from apps.accounts.roles import admin_tenant_ids, is_platform_admin, member_tenant_ids


class _JobScopedQuerySet(models.QuerySet):
    job_path = ""

    def _field(self, name):
        return f"{self.job_path}__{name}" if self.job_path else name

    def _shared_with(self, user):
        from apps.accounts.sharing import shared_with_user

        from .models import JobUserObjectPermission

        shared = shared_with_user(user, JobUserObjectPermission, "view_job")
        return models.Q(**{f"{self.job_path}__in" if self.job_path else "pk__in": shared})

    def visible_to(self, user):
        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(
            models.Q(**{self._field("owner"): user})
            | models.Q(**{self._field("tenant__in"): member_tenant_ids(user)})
            | self._shared_with(user)
        )

    def readable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(self._managing(user) | self._shared_with(user))

    def _managing(self, user):
        return models.Q(**{self._field("owner"): user}) | models.Q(**{self._field("tenant__in"): admin_tenant_ids(user)})

    def manageable_by(self, user):
        if is_platform_admin(user):
            return self.all()
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(self._managing(user))


class JobQuerySet(_JobScopedQuerySet):
    def holding_cells(self):
        """Jobs whose cells are taken: running, or waiting with a placement (pods starting)."""
        from .choices import JobState

        return self.filter(
            models.Q(state=JobState.RUNNING) | models.Q(state=JobState.WAITING, placement__isnull=False)
        )


def is_manageable(job, user):
    """`manageable_by` for one loaded job, without a query beyond the cached role lookups."""
    if is_platform_admin(user):
        return True
    return job.owner_id == user.pk or job.tenant_id in admin_tenant_ids(user)


def is_readable(job, user):
    """`readable_by` for one loaded job: a manager, or a user it is shared with (one query)."""
    return is_manageable(job, user) or job.user_shares.filter(user=user, permission__codename="view_job").exists()


class JobPartQuerySet(_JobScopedQuerySet):
    job_path = "job"


class TaskQuerySet(_JobScopedQuerySet):
    job_path = "job_attempt__job"


class TaskAttemptQuerySet(_JobScopedQuerySet):
    job_path = "task__job_attempt__job"
