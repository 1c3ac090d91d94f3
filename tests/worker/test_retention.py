from datetime import timedelta

from django.utils import timezone

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobUsage
from apps.jobs.retention import delete_expired_jobs
from apps.jobs.tasks import ensure_schedules

from .conftest import job_yaml


def test_completed_jobs_past_their_tenants_retention_are_deleted_with_their_logs(world, worker, submit, tmp_path):
    old = worker.wait_for_state(submit(world.a_member, job_yaml("old", roles={"main": {"gpu": 2, "commands": ["sleep 1"]}})), "SUCCEEDED")
    recent = worker.wait_for_state(submit(world.a_member, job_yaml("recent", roles={"main": {"commands": ["true"]}})), "SUCCEEDED")
    running = submit(world.a_member, job_yaml("running", roles={"main": {"commands": ["sleep 60"]}}))
    worker.wait_for_state(running, "RUNNING")
    b_job = worker.wait_for_state(submit(world.b_member, job_yaml("b", vc="team_b", roles={"main": {"commands": ["true"]}})), "SUCCEEDED")
    world.tenant_b.job_retention_days = 5
    world.tenant_b.save()
    now = timezone.now()
    Job.objects.filter(pk=old.pk).update(completed_at=now - timedelta(days=31))
    Job.objects.filter(pk=recent.pk).update(completed_at=now - timedelta(days=10))
    Job.objects.filter(pk=b_job.pk).update(completed_at=now - timedelta(days=6))
    old_pod = old.attempts.get().tasks.get().attempts.get().pod_name
    assert (tmp_path / "clusters" / "local" / "pods" / old_pod).exists()

    assert delete_expired_jobs() == 2
    assert set(Job.objects.values_list("name", flat=True)) == {"recent", "running"}
    assert not (tmp_path / "clusters" / "local" / "pods" / old_pod).exists()
    usage = JobUsage.objects.get(job_id=old.pk)
    assert (usage.username, usage.virtual_cluster, usage.state, usage.tenant) == ("a_member", "team_a", "SUCCEEDED", world.tenant_a)
    # 2 GPUs for about a second.
    assert 0 < usage.gpu_hours < 2 * 10 / 3600
    assert JobUsage.objects.filter(job_id=b_job.pk).exists()
    assert AuditEntry.objects.filter(action="job.retention.delete").count() == 2
    # Running it again deletes nothing more.
    assert delete_expired_jobs() == 0


def test_schedules_are_created_once_by_name(db):
    from django_q.models import Schedule

    ensure_schedules()
    ensure_schedules()
    names = list(Schedule.objects.filter(name__startswith="jobs.").values_list("name", flat=True))
    assert sorted(names) == ["jobs.notifications", "jobs.retention", "jobs.scheduler_loop"]
