"""The idle-GPU rule's e-mails: a lost task's notice goes out from the sweep, once."""

from datetime import timedelta

from django.core import mail
from django.utils import timezone
from django_q.models import Schedule

from apps.monitoring import tasks
from apps.monitoring.models import IdleGpuNotice
from apps.jobs.models import Job


def test_a_notice_a_lost_task_left_unsent_goes_out_once_from_the_sweep(world, tasks_inline):
    # post_migrate created the sweep's schedule when the test database was built.
    assert Schedule.objects.filter(name="monitoring.idle_gpu_notices", func=tasks.SCHEDULES[
        "monitoring.idle_gpu_notices"][0]).exists()
    job = Job.objects.create(owner=world.a_member, tenant=world.tenant_a, virtual_cluster=world.vc_a, name="idle",
                             protocol_text="", spec={})
    notice = IdleGpuNotice.objects.create(
        job=job, kind="warning", low_since=timezone.now(), recipients=["a_member@example.com"],
        subject="[pai] idle", body="figures",
    )
    assert tasks.resend_idle_gpu_notices() == 0  # just written: its own task may still send it
    IdleGpuNotice.objects.filter(pk=notice.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert tasks.resend_idle_gpu_notices() == 1
    assert [(m.subject, m.to, m.body) for m in mail.outbox] == [("[pai] idle", ["a_member@example.com"], "figures")]
    assert tasks.resend_idle_gpu_notices() == 0 and tasks.send_idle_gpu_notice(notice.pk) is False
    assert len(mail.outbox) == 1
