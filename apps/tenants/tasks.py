"""django-q2 entry points of the tenants app: sending the onboarding e-mails, retrying them."""

import logging
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from pai import schedules

from .models import OnboardingEmail

logger = logging.getLogger(__name__)

# A failed e-mail is retried by the periodic task this many times in all, then left for a
# team admin to resend.
MAX_ATTEMPTS = 5
# A queued e-mail still unsent after this long lost its task (a worker died, the broker
# lost it): the periodic task queues it again.
LOST_AFTER = timedelta(minutes=10)

SCHEDULES = {
    # name: (function, every N minutes)
    "tenants.onboarding_email_retry": ("apps.tenants.tasks.retry_onboarding_emails", 5),
}


def send_onboarding_emails(ids):
    """Send each e-mail of `ids` that is still to be sent; the rest (sent meanwhile) are skipped.

    Each e-mail is sent under its row's lock and marked sent in the same transaction, so
    that two deliveries of one task (a retry) send it once.
    """
    from .services import send_onboarding_email

    sent = 0
    for pk in ids:
        with transaction.atomic():
            email = (
                OnboardingEmail.objects.select_for_update(of=("self",))
                .filter(pk=pk, status__in=[OnboardingEmail.Status.QUEUED, OnboardingEmail.Status.FAILED])
                .select_related("membership__user", "membership__tenant")
                .first()
            )
            if email is None:
                continue
            email.attempts += 1
            try:
                send_onboarding_email(email.membership.user, email.membership.tenant, email.base_url)
            except Exception as exc:  # a mail server's or a bad text's failure is this row's, not the batch's
                logger.warning("onboarding e-mail %s failed", pk, exc_info=True)
                email.status = OnboardingEmail.Status.FAILED if email.attempts < MAX_ATTEMPTS else OnboardingEmail.Status.ABANDONED
                reason = "; ".join(exc.messages) if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
                email.last_error = reason[:500]
            else:
                email.status, email.sent_at, email.last_error = OnboardingEmail.Status.SENT, timezone.now(), ""
                sent += 1
            email.save(update_fields=["status", "attempts", "sent_at", "last_error"])
    return sent


def retry_onboarding_emails(now=None):
    """Queue again the e-mails that failed, and those queued long ago whose task was lost."""
    from .services import queue_onboarding_emails

    now = now or timezone.now()
    due = OnboardingEmail.objects.filter(status=OnboardingEmail.Status.FAILED) | OnboardingEmail.objects.filter(
        status=OnboardingEmail.Status.QUEUED, queued_at__lt=now - LOST_AFTER
    )
    ids = list(due.values_list("pk", flat=True)[:10_000])
    # Counted from now again, so that the next run does not queue them a second time.
    OnboardingEmail.objects.filter(pk__in=ids).update(queued_at=now)
    if ids:
        queue_onboarding_emails(ids)
    return len(ids)


def ensure_schedules():
    """Create or correct the tenants app's schedules by name; running it again changes nothing."""
    schedules.ensure(SCHEDULES)
