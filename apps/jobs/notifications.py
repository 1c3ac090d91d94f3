"""Job status e-mails: OpenPAI's `extras.jobStatusChangeNotification` (running, succeeded,
failed, stopped, retried: true/false).

The worker calls `record_transitions` inside the transaction that changes the jobs' state:
a `JobNotification` row per transition a job asked to hear about (the unique key keeps it
to one), then, once the transaction has committed, a django-q2 task per row sends the
e-mail (`send`), under a row lock so that a task delivered twice sends once. A schedule
hands out again what a lost task left unsent (`resend_unsent`).

Bodies are plain strings: job names and diagnostics are data, never template text.
"""

import logging
from datetime import timedelta

from django.core.mail import EmailMessage
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from pai.links import public_url
from scheduler import exitcodes

from .choices import NotificationEvent
from .models import Job, JobNotification

log = logging.getLogger(__name__)

WHAT_HAPPENED = {
    NotificationEvent.RUNNING: "is running",
    NotificationEvent.SUCCEEDED: "succeeded",
    NotificationEvent.FAILED: "failed",
    NotificationEvent.STOPPED: "was stopped",
    NotificationEvent.RETRIED: "is being retried",
}
FINAL_EVENTS = {"SUCCEEDED": NotificationEvent.SUCCEEDED, "FAILED": NotificationEvent.FAILED,
                "STOPPED": NotificationEvent.STOPPED}
DIAGNOSTICS_CHARS = 3000
UNSENT_GRACE = timedelta(minutes=1)


def record_transitions(transitions):
    """Note the e-mails `transitions` call for: (job id, attempt index or -1, event). Call it
    inside the transaction of the transition; the e-mails go once it commits."""
    transitions = [(job_id, index, NotificationEvent(event)) for job_id, index, event in transitions]
    if not transitions:
        return
    asked = dict(
        Job.objects.filter(pk__in={t[0] for t in transitions}).values_list(
            "pk", "spec__extras__jobStatusChangeNotification"
        )
    )
    rows = [
        JobNotification(job_id=job_id, attempt_index=index, event=event)
        for job_id, index, event in transitions
        if isinstance(asked.get(job_id), dict) and asked[job_id].get(event.value) is True
    ]
    if not rows:
        return
    JobNotification.objects.bulk_create(rows, ignore_conflicts=True)
    keys = [(r.job_id, r.attempt_index, r.event) for r in rows]
    transaction.on_commit(lambda: _enqueue(keys))


def _enqueue(keys):
    from django_q.tasks import async_task

    for job_id, index, event in keys:
        pk = JobNotification.objects.filter(
            job_id=job_id, attempt_index=index, event=event, sent_at__isnull=True
        ).values_list("pk", flat=True).first()
        if pk is not None:
            async_task("apps.jobs.tasks.send_job_notification", pk, task_name=f"jobs.notification.{pk}")


def resend_unsent(now=None):
    """Hand out again the e-mails a lost task left unsent. Returns how many."""
    from django_q.tasks import async_task

    now = now or timezone.now()
    pending = list(
        JobNotification.objects.filter(sent_at__isnull=True, created_at__lt=now - UNSENT_GRACE)
        .order_by("created_at").values_list("pk", flat=True)[:500]
    )
    for pk in pending:
        async_task("apps.jobs.tasks.send_job_notification", pk, task_name=f"jobs.notification.{pk}")
    return len(pending)


@transaction.atomic
def send(pk):
    """Send one notification unless it has been sent. True when this call sent it."""
    row = (
        JobNotification.objects.select_for_update()
        .filter(pk=pk, sent_at__isnull=True)
        .select_related("job__owner", "job__virtual_cluster")
        .first()
    )
    if row is None:
        return False
    job = row.job
    row.sent_at = timezone.now()
    if job.owner.email:
        subject, body = render(row)
        EmailMessage(subject, body, to=[job.owner.email]).send()
        row.sent_to = job.owner.email
    else:
        log.warning("job %s: its owner has no e-mail address; %s not sent", job.framework_name, row.event)
    row.save(update_fields=["sent_at", "sent_to"])
    return bool(row.sent_to)


def job_url(job):
    """The job's page in the portal (tasks, logs, why it waits or ended)."""
    return public_url() + reverse("portal:job-detail", kwargs={"username": job.owner.username, "name": job.name})


def render(row):
    """(subject, body) of a notification, in plain text."""
    job = row.job
    what = WHAT_HAPPENED[NotificationEvent(row.event)]
    subject = f"[pai] Job {job.framework_name} {what}"
    lines = [
        f"Your job {job.framework_name} {what}.",
        "",
        f"Virtual cluster: {job.virtual_cluster.name}",
        f"State: {job.state}",
    ]
    if row.attempt_index >= 0:
        lines.append(f"Attempt: {row.attempt_index}")
    attempt = job.attempts.filter(index=row.attempt_index).first() if row.attempt_index >= 0 else None
    if row.event != NotificationEvent.RUNNING:
        code = job.app_exit_code if row.event in FINAL_EVENTS.values() else getattr(attempt, "exit_code", None)
        if code is not None:
            lines.append(f"Exit code: {code} ({exitcodes.row(code).phrase})")
        if row.event == NotificationEvent.RETRIED:
            lines.append(f"Retries so far: {job.retries}")
        diagnostics = (attempt.exit_diagnostics if attempt is not None else "") or job.wait_reason
        if diagnostics and row.event != NotificationEvent.SUCCEEDED:
            lines += ["", diagnostics[:DIAGNOSTICS_CHARS]]
    lines += ["", f"Details: {job_url(job)}", "",
              "You get this e-mail because the job's extras.jobStatusChangeNotification asks for it."]
    return subject, "\n".join(lines)
