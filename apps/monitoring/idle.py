"""The idle-GPU rule, enforced per team (the rule the onboarding e-mail states).

A team (`Tenant`) sets a threshold X (`idle_gpu_threshold_percent`), a duration Y
(`idle_gpu_hours`), a grace Z (`idle_gpu_grace_hours`) and an action
(`idle_gpu_action`). At each utilisation sample (`apps.monitoring.efficiency`), for each
running job that holds GPUs:

- a sample at or above X ends the job's idle spell (and its warning);
- below X for Y hours → the owner gets an e-mail with the job's figures (`warning`);
- still below X Z hours after the warning → with `notify`, the team admins get an e-mail
  (`admins`); with `stop`, the job is stopped with its own exit code −230 (never retried;
  diagnosis "stopped for low GPU use: …") and the owner is told (`stopped`);
- with `none`, pai only measures (the abnormal-jobs view lists the job).

A job tagged `PAI_IDLE_GPU_EXEMPT_TAG` (default `idle-gpu-exempt`) is measured but left
alone. Every warning, escalation, stop and recovery after a warning is audited
(`job.idle_gpu.*`, actor "system"); changes of the rule are audited by the tenant's
service (`tenant.policies`). E-mails are rows (`IdleGpuNotice`) written with the decision
and sent by a django-q2 task once it commits.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.audit.services import record
from apps.jobs.choices import ExecutionType
from apps.jobs.models import Job, JobTag
from apps.jobs.notifications import job_url
from apps.tenants.choices import IdleGpuAction
from apps.tenants.models import Membership
from apps.tenants.services import idle_gpu_rule
from pai.links import public_url
from scheduler import exitcodes

from .models import IdleGpuNotice, JobGpuUse

SOURCE_WORDS = {
    "prometheus": "GPU utilisation (DCGM exporter, through Prometheus)",
    "nvidia-smi": "GPU utilisation (nvidia-smi)",
    "cpu": "CPU use of the task's processes (no GPU figure on this cluster)",
}


def _hours(delta):
    return delta.total_seconds() / 3600


def stop_reason(use, threshold):
    mean = use.low_average_percent if use.low_average_percent is not None else use.percent
    return (
        f"stopped for low GPU use: {mean:.1f} % on average over {_hours(use.sampled_at - use.low_since):.1f} hours "
        f"(the team's threshold is {threshold} %)"
    )


def apply_rule(uses, now):
    """Track each job's idle spell and apply its team's rule; call inside the transaction
    that stored the samples. `uses` are the JobGpuUse rows just sampled."""
    if not uses:
        return
    jobs = Job.objects.select_related("tenant", "owner", "virtual_cluster").only(
        "id", "name", "state", "execution_type", "total_gpu", "owner__username", "owner__email",
        "owner__first_name", "owner__last_name", "virtual_cluster__name", "tenant__slug", "tenant__name",
        "tenant__contact_email", "tenant__idle_gpu_threshold_percent", "tenant__idle_gpu_hours",
        "tenant__idle_gpu_action", "tenant__idle_gpu_grace_hours",
    ).in_bulk([use.job_id for use in uses])
    exempt = set(
        JobTag.objects.filter(job_id__in=list(jobs), name=settings.PAI_IDLE_GPU_EXEMPT_TAG).values_list("job_id", flat=True)
    )
    abnormal = settings.PAI_ABNORMAL_GPU_PERCENT
    for use in uses:
        job = jobs.get(use.job_id)
        if job is None:
            continue
        tenant = job.tenant
        if use.percent < abnormal:
            use.under_abnormal_since = use.under_abnormal_since or now
        else:
            use.under_abnormal_since = None
        if use.percent < tenant.idle_gpu_threshold_percent:
            if use.low_since is None:
                use.low_since, use.low_percent_sum, use.low_samples = now, 0.0, 0
            use.low_percent_sum += use.percent
            use.low_samples += 1
        else:
            if use.warned_at is not None:
                record(None, "job.idle_gpu.recovered", job, changes={
                    "percent": round(use.percent, 2), "threshold": tenant.idle_gpu_threshold_percent,
                    "idleSince": use.low_since.isoformat() if use.low_since else None,
                })
            use.low_since, use.low_percent_sum, use.low_samples = None, 0.0, 0
            use.warned_at = use.escalated_at = None
        if (
            use.low_since is not None
            and job.total_gpu > 0
            and job.id not in exempt
            and tenant.idle_gpu_action != IdleGpuAction.NONE
            and job.execution_type == ExecutionType.START
        ):
            _enforce(job, use, now)
        use.save(update_fields=[
            "low_since", "low_percent_sum", "low_samples", "under_abnormal_since", "warned_at", "escalated_at",
        ])


def _enforce(job, use, now):
    tenant = job.tenant
    if use.warned_at is None:
        if now - use.low_since >= timedelta(hours=tenant.idle_gpu_hours):
            use.warned_at = now
            _notice(job, use, IdleGpuNotice.Kind.WARNING, [job.owner.email] if job.owner.email else [])
            record(None, "job.idle_gpu.warned", job, changes=_figures(job, use))
        return
    if use.escalated_at is not None or now - use.warned_at < timedelta(hours=tenant.idle_gpu_grace_hours):
        return
    use.escalated_at = now
    if tenant.idle_gpu_action == IdleGpuAction.STOP:
        from apps.jobs.services import set_execution_type

        reason = stop_reason(use, tenant.idle_gpu_threshold_percent)
        set_execution_type(None, job, ExecutionType.STOP, stop_exit_code=exitcodes.STOPPED_FOR_LOW_GPU_USE,
                           stop_reason=reason)
        _notice(job, use, IdleGpuNotice.Kind.STOPPED, [job.owner.email] if job.owner.email else [], reason=reason)
        record(None, "job.idle_gpu.stopped", job, changes={**_figures(job, use), "exitCode": exitcodes.STOPPED_FOR_LOW_GPU_USE})
    else:
        admins = sorted(
            Membership.objects.filter(tenant=tenant, role=Membership.Role.ADMIN, user__is_active=True)
            .exclude(user__email="").values_list("user__email", flat=True)
        )
        if tenant.contact_email and tenant.contact_email not in admins:
            admins.append(tenant.contact_email)
        _notice(job, use, IdleGpuNotice.Kind.ADMINS, admins)
        record(None, "job.idle_gpu.admins_notified", job, changes={**_figures(job, use), "recipients": admins})


def _figures(job, use):
    return {
        "percent": round(use.percent, 2),
        "idleMeanPercent": round(use.low_average_percent, 2) if use.low_average_percent is not None else None,
        "idleSince": use.low_since.isoformat(),
        "threshold": job.tenant.idle_gpu_threshold_percent,
        "source": use.source,
        "gpus": job.total_gpu,
    }


def _notice(job, use, kind, recipients, reason=""):
    subject, body = render(job, use, kind, reason)
    notice, created = IdleGpuNotice.objects.get_or_create(
        job=job, low_since=use.low_since, kind=kind,
        defaults={"recipients": recipients, "subject": subject[:300], "body": body},
    )
    if created:
        transaction.on_commit(lambda: _enqueue([notice.pk]))
    return notice


def _enqueue(pks):
    from django_q.tasks import async_task

    for pk in pks:
        async_task("apps.monitoring.tasks.send_idle_gpu_notice", pk, task_name=f"monitoring.idle_gpu_notice.{pk}")


def render(job, use, kind, reason=""):
    """(subject, body) of an idle-GPU e-mail, plain text with the job's figures."""
    tenant = job.tenant
    name = f"{job.owner.username}~{job.name}"
    idle_hours = _hours(use.sampled_at - use.low_since)
    mean = use.low_average_percent if use.low_average_percent is not None else use.percent
    figures = [
        f"Job: {name}",
        f"Team: {tenant.name}    Virtual cluster: {job.virtual_cluster.name}    GPUs: {job.total_gpu}",
        f"Measured: {SOURCE_WORDS.get(use.source, use.source)}",
        f"Last sample: {use.percent:.1f} %",
        f"Below {tenant.idle_gpu_threshold_percent} % since {use.low_since:%Y-%m-%d %H:%M} UTC "
        f"({idle_hours:.1f} hours), {mean:.1f} % on average",
    ]
    if use.average_percent is not None:
        figures.append(f"Mean over the attempt: {use.average_percent:.1f} % ({use.samples} samples)")
    exempt = (f"A job that must keep idle GPUs may carry the tag '{settings.PAI_IDLE_GPU_EXEMPT_TAG}' "
              "(ask your team admins first).")
    if kind == IdleGpuNotice.Kind.WARNING:
        subject = f"[pai] Job {name} leaves its GPUs idle"
        if tenant.idle_gpu_action == IdleGpuAction.STOP:
            then = f"If it stays idle {tenant.idle_gpu_grace_hours} more hours, pai stops it (exit code -230)."
        else:
            then = f"If it stays idle {tenant.idle_gpu_grace_hours} more hours, your team admins are told."
        lines = [f"Your job {name} has used its GPUs below your team's threshold for {idle_hours:.1f} hours.", "",
                 *figures, "", f"Team rule: {idle_gpu_rule(tenant)}", then, "",
                 "Stop the job if it is done or stuck, or make it use its GPUs.", exempt]
    elif kind == IdleGpuNotice.Kind.STOPPED:
        subject = f"[pai] Job {name} was stopped for low GPU use"
        lines = [f"Your job {name} was stopped: {reason}.", "", *figures, "",
                 f"Team rule: {idle_gpu_rule(tenant)}", "The job ended with exit code -230 and is not retried.",
                 exempt]
    else:
        subject = f"[pai] Job {name} of {tenant.name} leaves its GPUs idle"
        lines = [f"The job {name} of {job.owner.username} has stayed below the team's threshold "
                 f"for {idle_hours:.1f} hours; its owner was warned {tenant.idle_gpu_grace_hours} hours ago.", "",
                 *figures, "", f"Team rule: {idle_gpu_rule(tenant)}",
                 "As a team admin you may stop it from its page, or from the abnormal jobs page: "
                 + public_url() + reverse("portal:abnormal-jobs"), exempt]
    lines += ["", f"Details: {job_url(job)}"]
    return subject, "\n".join(lines)


@transaction.atomic
def send(pk):
    """Send one notice unless it has been sent. True when this call sent it."""
    from django.core.mail import EmailMessage

    notice = IdleGpuNotice.objects.select_for_update().filter(pk=pk, sent_at__isnull=True).first()
    if notice is None:
        return False
    notice.sent_at = timezone.now()
    if notice.recipients:
        EmailMessage(notice.subject, notice.body, to=list(notice.recipients)).send()
    notice.save(update_fields=["sent_at"])
    return bool(notice.recipients)


UNSENT_GRACE = timedelta(minutes=1)


def resend_unsent(now=None):
    """Hand out again the notices a lost task left unsent. Returns how many."""
    now = now or timezone.now()
    pending = list(
        IdleGpuNotice.objects.filter(sent_at__isnull=True, created_at__lt=now - UNSENT_GRACE)
        .order_by("created_at").values_list("pk", flat=True)[:500]
    )
    _enqueue(pending)
    return len(pending)


def idle_use(job):
    """The job's JobGpuUse row or None."""
    return JobGpuUse.objects.filter(job=job).first()
