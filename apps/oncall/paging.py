"""Paging the DRIs: at once and at any hour, by e-mail and in chat, when an incident opens
or its severity rises.

The SLA clocks may pause outside monitoring hours; a page never does. Each channel of a
page (the e-mail, each chat webhook) is a `Notification` row with its own key, written in
the transaction that sends it: a page is sent once per channel, and a channel that failed
(a mail server or chat service down) is tried again by the next sweep.
"""

import json
import logging
import smtplib
import urllib.error
import urllib.request

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from .choices import ChatFormat, NotificationKind
from .models import ChatWebhook, Incident, Notification

logger = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 10
SEVERITY_COLOURS = {0: "8b0000", 1: "d0342c", 2: "e08a00", 3: "6b7280"}


def _slack_escape(text):
    # Slack reads <...> as links and mentions (<!channel> would ping everyone): user-written
    # text is escaped as Slack's documentation asks.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def chat_payload(fmt, *, title, lines, url, severity):
    """The JSON body of an incoming-webhook message in `fmt` (Slack- or Teams-compatible)."""
    if fmt == ChatFormat.TEAMS:
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": title,
            "themeColor": SEVERITY_COLOURS.get(severity, "6b7280"),
            "title": title,
            "text": "\n\n".join(lines),
            "potentialAction": [{"@type": "OpenUri", "name": "Open the incident", "targets": [{"os": "default", "uri": url}]}],
        }
    text = f"*<{url}|{_slack_escape(title)}>*\n" + "\n".join(_slack_escape(line) for line in lines)
    return {"text": text}


def post_webhook(hook, payload):
    """POST one message; raises on a network error or a non-2xx answer."""
    request = urllib.request.Request(
        hook.url, data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "pai"},
    )
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
        response.read()


def _once(key, kind, incident, recipients, subject, send):
    """Record `key` and run `send` in one transaction: once per key, retried when `send` fails."""
    try:
        with transaction.atomic():
            Notification.objects.create(key=key, kind=kind, incident=incident, recipients=recipients, subject=subject[:255])
            send()
    except IntegrityError:
        return False
    except (OSError, smtplib.SMTPException, urllib.error.URLError) as exc:
        logger.warning("could not send %s: %s", key, exc)
        return False
    return True


def notify_everywhere(key, kind, incident, users, subject, lines, url):
    """E-mail `users` and post to every active chat webhook, each channel once per key."""
    emails = sorted({u.email for u in users if u.email})
    body = "\n".join(lines) + f"\n\n{url}\n"
    done = set(Notification.objects.filter(key__startswith=f"{key}:").values_list("key", flat=True))
    sent = 0
    if emails and f"{key}:email" not in done:
        sent += _once(f"{key}:email", kind, incident, emails, subject,
                      lambda: send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, emails))
    for hook in ChatWebhook.objects.filter(active=True):
        if f"{key}:chat:{hook.pk}" in done:
            continue
        payload = chat_payload(hook.format, title=subject, lines=lines, url=url, severity=incident.severity)
        sent += _once(f"{key}:chat:{hook.pk}", kind, incident, [f"chat:{hook.name}"], subject,
                      lambda hook=hook, payload=payload: post_webhook(hook, payload))
    return sent


def page(incident, now):
    """Page the DRIs about `incident` at its current severity (a no-op when done already)."""
    from .services import incident_url, rotation_dris

    dris = list(incident.assignees.all())
    if incident.rotation is not None:
        dris += [u for u in rotation_dris(incident.rotation, now) if u not in dris]
    where = f" on {incident.cluster} ({incident.cluster_class})" if incident.cluster_id else ""
    subject = f"[pai] Sev {incident.severity}{where}: {incident.title}"
    lines = [
        f"Incident #{incident.pk}, severity {incident.get_severity_display()}.",
        f"Status: {incident.get_status_display()}; opened {incident.triggered_at:%Y-%m-%d %H:%M} UTC from "
        f"{incident.get_source_display().lower()}.",
        "On call: " + (", ".join(u.get_username() for u in dris) or "nobody — check the rotation"),
    ]
    key = f"incident:{incident.pk}:page:sev{incident.severity}"
    return notify_everywhere(key, NotificationKind.PAGE, incident, dris, subject, lines, incident_url(incident))


def page_open_incidents(now):
    """Page every open incident not yet paged on every channel at its severity (the sweep's
    safety net behind the page sent when the incident opened or its severity rose)."""
    sent = 0
    for incident in Incident.objects.open().select_related("cluster", "rotation").prefetch_related("assignees"):
        sent += page(incident, now)
    return sent
