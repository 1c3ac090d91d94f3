"""On-call business actions: rotations, incidents and their transitions, the SLA sweep, alert intake.

Every action is atomic, validates its input, appends to the incident's timeline and
writes an audit row. Views and tasks only call these.
"""

import hashlib
import json
import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.accounts.roles import ADMIN_GROUP
from apps.audit.services import record
from apps.clusters.models import Cluster
from apps.tenants.models import Membership
from pai.links import absolute

from . import paging
from .choices import (
    AlertStatus,
    IncidentSource,
    IncidentStatus,
    NotificationKind,
    Severity,
    TimelineKind,
)
from .models import Alert, AlertRoute, FollowUp, Incident, Notification, Rotation, RotationOverride, SlaPolicy, TimelineEntry
from .querysets import is_responder

logger = logging.getLogger(__name__)
User = get_user_model()


class TransitionRefused(Exception):
    """The incident's status does not allow the requested change."""


# The incident life cycle. Mitigation may come straight from `triggered` (an alert that
# clears on its own, or a fix before anyone acknowledged); resolving needs a human ack.
TRANSITIONS = {
    IncidentStatus.TRIGGERED: {IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED},
    IncidentStatus.ACKNOWLEDGED: {IncidentStatus.MITIGATED, IncidentStatus.RESOLVED},
    IncidentStatus.MITIGATED: {IncidentStatus.RESOLVED},
    IncidentStatus.RESOLVED: {IncidentStatus.CLOSED},
    IncidentStatus.CLOSED: set(),
}
STAMP = {
    IncidentStatus.ACKNOWLEDGED: "acknowledged_at",
    IncidentStatus.MITIGATED: "mitigated_at",
    IncidentStatus.RESOLVED: "resolved_at",
    IncidentStatus.CLOSED: "closed_at",
}


# --- Rotations ------------------------------------------------------------------------


def _users_by_id(ids):
    found = User.objects.in_bulk(set(ids))
    return [found[i] for i in ids if i in found]


def rotation_dris(rotation, at=None):
    """The users on call in one rotation at `at` (default now), overrides applied."""
    at = at or timezone.now()
    return _users_by_id(rotation.plan().on_call_at(at, rotation.plan_overrides()))


def responders_of(rotation):
    """Who may cover a shift or own a follow-up: the rotation's members and the platform admins."""
    members = Q(rotation_memberships__rotation=rotation) if rotation is not None else Q(
        rotation_memberships__rotation__tenant__isnull=True, rotation_memberships__rotation__active=True
    )
    return User.objects.filter(is_active=True).filter(members | Q(groups__name=ADMIN_GROUP) | Q(is_superuser=True)).distinct()


def _with_schedule(queryset):
    return queryset.filter(active=True).prefetch_related("members", "overrides")


def on_call(at=None, rotations=None):
    """[(rotation, [users])] for every active rotation (or the given queryset) at `at`."""
    at = at or timezone.now()
    rotations = _with_schedule(rotations if rotations is not None else Rotation.objects.all())
    rows = []
    for rotation in rotations:
        rows.append((rotation, rotation.plan().on_call_at(at, rotation.plan_overrides())))
    users = User.objects.in_bulk({uid for _, ids in rows for uid in ids})
    return [(rotation, [users[i] for i in ids if i in users]) for rotation, ids in rows]


def current_dris(at=None):
    """The platform rotations' DRIs on call at `at` (default now), each once, in rotation order."""
    dris = []
    for _, users in on_call(at, Rotation.objects.filter(tenant__isnull=True)):
        dris += [u for u in users if u not in dris]
    return dris


def default_rotation():
    return Rotation.objects.filter(tenant__isnull=True, active=True).order_by("name").first()


def upcoming_shifts(rotation, count=8, at=None):
    """The running shift and the next ones: start, end, scheduled users, overrides inside."""
    at = at or timezone.now()
    plan = rotation.plan()
    overrides = list(rotation.overrides.select_related("user", "replaces"))
    shifts = plan.shifts_from(at, count)
    users = User.objects.in_bulk({uid for s in shifts for uid in s.scheduled})
    return [
        {
            "index": s.index,
            "starts_at": s.starts_at,
            "ends_at": s.ends_at,
            "scheduled": [users[i] for i in s.scheduled if i in users],
            "overrides": [o for o in overrides if o.starts_at < s.ends_at and s.starts_at < o.ends_at],
            "current": s.starts_at <= at < s.ends_at,
        }
        for s in shifts
    ]


def fair_share(rotation, start, end):
    """[(user, scheduled shifts, hours on call)] over [start, end), overrides counted."""
    shares = rotation.plan().fair_share(start, end, rotation.plan_overrides())
    users = User.objects.in_bulk(set(shares))
    return [(users[uid], row["shifts"], round(row["hours"], 1)) for uid, row in shares.items() if uid in users]


def _require_schedule_rights(rotation, actor, involved):
    """Rotation managers change any shift; a member may arrange cover for a shift they are part of."""
    if Rotation.objects.manageable_by(actor).filter(pk=rotation.pk).exists():
        return
    if actor in involved and rotation.members.filter(user=actor).exists():
        return
    raise PermissionDenied("Only the rotation's managers, or the members concerned, change its shifts.")


@transaction.atomic
def add_override(rotation, actor, *, user, replaces, starts_at, ends_at, reason=""):
    """`user` covers for `replaces` from `starts_at` to `ends_at`."""
    _require_schedule_rights(rotation, actor, {user, replaces})
    if ends_at <= starts_at:
        raise ValidationError({"ends_at": "An override must end after it starts."})
    if user == replaces:
        raise ValidationError({"user": "Someone cannot cover for themselves."})
    if not rotation.members.filter(user=replaces).exists():
        raise ValidationError({"replaces": f"{replaces} is not a member of {rotation}."})
    if not responders_of(rotation).filter(pk=user.pk).exists():
        raise ValidationError({"user": f"{user} is neither a member of {rotation} nor a platform admin."})
    override = RotationOverride.objects.create(
        rotation=rotation, user=user, replaces=replaces, starts_at=starts_at, ends_at=ends_at, reason=reason
    )
    record(actor, "oncall.rotation.override", rotation, tenant=rotation.tenant, changes={
        "user": user.get_username(), "replaces": replaces.get_username(),
        "starts_at": starts_at.isoformat(), "ends_at": ends_at.isoformat(),
    })
    return override


@transaction.atomic
def swap_shifts(rotation, actor, *, first_index, second_index, first_user, second_user):
    """`first_user` (scheduled in shift `first_index`) and `second_user` trade their shifts."""
    _require_schedule_rights(rotation, actor, {first_user, second_user})
    if first_user == second_user or first_index == second_index:
        raise ValidationError({"shift": "A swap needs two different people and two different shifts."})
    plan = rotation.plan()
    for index, user in ((first_index, first_user), (second_index, second_user)):
        if user.pk not in plan.scheduled(index):
            raise ValidationError({"shift": f"{user} is not scheduled in shift {index}."})
    first, second = plan.shift(first_index), plan.shift(second_index)
    return [
        add_override(rotation, actor, user=second_user, replaces=first_user,
                     starts_at=first.starts_at, ends_at=first.ends_at, reason="swap"),
        add_override(rotation, actor, user=first_user, replaces=second_user,
                     starts_at=second.starts_at, ends_at=second.ends_at, reason="swap"),
    ]


# --- Notifications --------------------------------------------------------------------


def _notify(key, kind, users, subject, body, **links):
    """Send one e-mail at most once per key. Returns whether this call recorded the key.

    A step with nobody to tell (no other DRI on the shift) is recorded all the same, so
    that it is settled and not tried again.
    """
    emails = sorted({u.email for u in users if u.email})
    try:
        with transaction.atomic():
            Notification.objects.create(key=key, kind=kind, recipients=emails, subject=subject[:255], **links)
            if emails:
                send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, emails)
    except IntegrityError:
        return False
    except (OSError, smtplib.SMTPException):
        # The mail server failed: the key's row rolled back with it, so the next sweep retries.
        logger.warning("could not send %s to %s", key, emails, exc_info=True)
        return False
    return True


def incident_url(incident):
    return absolute(f"/oncall/incidents/{incident.pk}/")


def send_handoffs(now=None):
    """E-mail the incoming DRIs of every shift that started in the last day, once per shift."""
    now = now or timezone.now()
    sent = 0
    for rotation in _with_schedule(Rotation.objects.all()):
        plan = rotation.plan()
        index = plan.shift_index_at(now)
        if index is None:
            continue
        shift = plan.shift(index)
        if now - shift.starts_at > timedelta(days=1):
            continue
        dris = _users_by_id(plan.on_call_at(now, rotation.plan_overrides()))
        if not dris:
            continue
        open_incidents = Incident.objects.open().filter(rotation=rotation) if rotation.tenant_id else Incident.objects.open()
        lines = [f"- {i} (severity {i.severity}, {i.get_status_display()}): {incident_url(i)}" for i in open_incidents[:50]]
        body = (
            f"You are on call for {rotation} from {shift.starts_at:%Y-%m-%d %H:%M} UTC "
            f"to {shift.ends_at:%Y-%m-%d %H:%M} UTC.\n\n"
            + ("Open incidents:\n" + "\n".join(lines) if lines else "No open incidents.")
        )
        sent += _notify(
            f"handoff:{rotation.pk}:{index}", NotificationKind.HANDOFF, dris,
            f"[pai] Your on-call shift for {rotation} starts", body, rotation=rotation,
        )
    return sent


# --- Incidents ------------------------------------------------------------------------


def _timeline(incident, actor, kind, message="", *, from_status="", to_status="", data=None, at=None):
    authenticated = actor is not None and actor.is_authenticated
    return TimelineEntry.objects.create(
        incident=incident,
        created_at=at or timezone.now(),
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "system",
        kind=kind,
        message=message,
        from_status=from_status,
        to_status=to_status,
        data=data or {},
    )


def _apply_sla(incident, now):
    """Snapshot the matching SLA row and set the deadlines that follow from it."""
    policy = SlaPolicy.matching(incident.severity, incident.cluster_class)
    incident.sla = policy.snapshot() if policy else None
    if not incident.sla:
        incident.ack_deadline = incident.next_update_deadline = None
        return
    calendar = incident.sla_calendar()
    incident.ack_deadline = calendar.add(incident.triggered_at, timedelta(seconds=incident.sla["ack_within_seconds"]))
    if incident.status in (IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED):
        since = incident.last_update_at or now
        incident.next_update_deadline = calendar.add(since, timedelta(seconds=incident.sla["update_every_seconds"]))


def _restart_update_clock(incident, now):
    if incident.sla and incident.status in (IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED):
        every = timedelta(seconds=incident.sla["update_every_seconds"])
        incident.next_update_deadline = incident.sla_calendar().add(now, every)
    else:
        incident.next_update_deadline = None


def _validate_severity(value, field="severity"):
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValidationError({field: "Severity is 0, 1, 2 or 3."}) from None
    if value not in Severity.values:
        raise ValidationError({field: "Severity is 0, 1, 2 or 3."})
    return value


@transaction.atomic
def open_incident(
    *, title, severity, source, description="", cluster=None, reporter=None, actor=None, assignees=None,
    rotation=None, group_key=None, auto_mitigate=False, severity_confirmed=True, now=None,
):
    """Open an incident: snapshot the SLA, assign the current DRIs unless told otherwise."""
    now = now or timezone.now()
    title = (title or "").strip()
    if not title:
        raise ValidationError({"title": "An incident needs a title."})
    severity = _validate_severity(severity)
    if source not in IncidentSource.values:
        raise ValidationError({"source": f"Unknown source '{source}'."})
    rotation = rotation or default_rotation()
    incident = Incident(
        title=title[:200],
        description=description or "",
        severity=severity,
        proposed_severity=severity if not severity_confirmed else None,
        severity_confirmed=severity_confirmed,
        cluster=cluster,
        cluster_class=cluster.cluster_class if cluster else "",
        source=source,
        reporter=reporter,
        rotation=rotation,
        group_key=group_key,
        auto_mitigate=auto_mitigate,
        triggered_at=now,
    )
    _apply_sla(incident, now)
    incident.save()
    if assignees is None:
        assignees = rotation_dris(rotation, now) if rotation else current_dris(now)
    incident.assignees.set(assignees)
    _timeline(
        incident, actor, TimelineKind.OPENED, f"Opened from {incident.get_source_display().lower()}.",
        to_status=incident.status, at=now,
        data={"severity": severity, "assignees": [u.get_username() for u in assignees]},
    )
    record(actor, "oncall.incident.open", incident, changes={
        "severity": severity, "source": source, "cluster": cluster.name if cluster else None,
        "sla": incident.sla["name"] if incident.sla else None,
    })
    _page_on_commit(incident)
    return incident


def _page_on_commit(incident):
    """Page the DRIs as soon as the incident is stored, whatever the hour; the sweep retries."""
    from django_q.tasks import async_task

    pk = incident.pk
    transaction.on_commit(lambda: async_task("apps.oncall.tasks.page_incident", pk, task_name="oncall.page"))


def report_incident(user, *, title, description="", severity, cluster=None):
    """Anyone opens an incident. A responder's severity stands; a user's is a proposal for a DRI to confirm."""
    responder = is_responder(user)
    return open_incident(
        title=title, description=description, severity=severity, cluster=cluster, reporter=user, actor=user,
        source=IncidentSource.DRI if responder else IncidentSource.USER, severity_confirmed=responder,
    )


def check_may_act(incident, actor, *, responders_only=False):
    """PermissionDenied unless the actor may act on the incident (a DRI or platform admin
    alone when `responders_only`). The API asks before it reads the request's body, so
    that a user who may not act learns that, not what their input lacked."""
    if responders_only and not is_responder(actor):
        raise PermissionDenied("Only a DRI or a platform admin confirms a severity.")
    if actor is not None and not Incident.objects.manageable_by(actor).filter(pk=incident.pk).exists():
        raise PermissionDenied("Only the DRIs, the assignees and platform admins act on an incident.")


def _locked(incident, actor):
    """Re-read the incident under a row lock, checking the actor may act on it."""
    check_may_act(incident, actor)
    return Incident.objects.select_for_update().get(pk=incident.pk)


def _transition(incident, actor, to_status, message="", *, now=None, action):
    now = now or timezone.now()
    locked = _locked(incident, actor)
    from_status = locked.status
    if to_status not in TRANSITIONS[IncidentStatus(from_status)]:
        raise TransitionRefused(
            f"Cannot {action} an incident that is {locked.get_status_display().lower()}."
        )
    locked.status = to_status
    setattr(locked, STAMP[to_status], now)
    if to_status == IncidentStatus.ACKNOWLEDGED:
        locked.acknowledged_by = actor if actor is not None and actor.is_authenticated else None
        locked.last_update_at = now
    _restart_update_clock(locked, now)
    locked.save()
    _timeline(locked, actor, TimelineKind.TRANSITION, message.strip(), from_status=from_status, to_status=to_status, at=now)
    record(actor, f"oncall.incident.{action}", locked, changes={"status": [from_status, to_status]})
    incident.refresh_from_db()
    return incident


@transaction.atomic
def acknowledge(incident, actor, *, now=None):
    return _transition(incident, actor, IncidentStatus.ACKNOWLEDGED, now=now, action="acknowledge")


@transaction.atomic
def mitigate(incident, actor, message="", *, now=None):
    return _transition(incident, actor, IncidentStatus.MITIGATED, message, now=now, action="mitigate")


@transaction.atomic
def resolve(incident, actor, message="", *, now=None):
    return _transition(incident, actor, IncidentStatus.RESOLVED, message, now=now, action="resolve")


@transaction.atomic
def close(incident, actor, *, now=None):
    """Closing means the review is done: it needs the cause and the prevention."""
    locked = _locked(incident, actor)
    missing = [f for f in ("cause", "prevention") if not getattr(locked, f).strip()]
    if missing and locked.status == IncidentStatus.RESOLVED:
        raise ValidationError({f: "Write the review before closing the incident." for f in missing})
    return _transition(incident, actor, IncidentStatus.CLOSED, now=now, action="close")


@transaction.atomic
def post_update(incident, actor, message, *, now=None):
    """A status update from the responders; it restarts the update clock."""
    now = now or timezone.now()
    message = (message or "").strip()
    if not message:
        raise ValidationError({"message": "An update needs a message."})
    locked = _locked(incident, actor)
    if locked.status in (IncidentStatus.TRIGGERED, IncidentStatus.CLOSED):
        raise TransitionRefused(
            "Acknowledge the incident before posting updates." if locked.status == IncidentStatus.TRIGGERED
            else "A closed incident takes no more updates."
        )
    locked.last_update_at = now
    _restart_update_clock(locked, now)
    locked.save()
    entry = _timeline(locked, actor, TimelineKind.UPDATE, message, at=now)
    record(actor, "oncall.incident.update", locked, changes={"message": message[:500]})
    incident.refresh_from_db()
    return entry


@transaction.atomic
def confirm_severity(incident, actor, severity, *, now=None):
    """A DRI sets the final severity; the SLA row is chosen again for it, clocks from the start."""
    now = now or timezone.now()
    check_may_act(incident, actor, responders_only=True)
    severity = _validate_severity(severity)
    locked = _locked(incident, actor)
    if locked.status == IncidentStatus.CLOSED:
        raise TransitionRefused("A closed incident's severity is final.")
    before = locked.severity
    locked.severity = severity
    locked.severity_confirmed = True
    _apply_sla(locked, now)
    locked.save()
    if severity < before:  # a lower number is more severe: the DRIs are paged again
        _page_on_commit(locked)
    _timeline(locked, actor, TimelineKind.SEVERITY, f"Severity confirmed: {severity} (was {before}).",
              data={"from": before, "to": severity}, at=now)
    record(actor, "oncall.incident.confirm_severity", locked, changes={"severity": [before, severity]})
    incident.refresh_from_db()
    return incident


@transaction.atomic
def record_review(incident, actor, *, cause, prevention, follow_ups=(), now=None):
    """Why it happened, how to avoid it, and follow-up items (title, owner, due date, link)."""
    now = now or timezone.now()
    locked = _locked(incident, actor)
    if locked.status not in (IncidentStatus.MITIGATED, IncidentStatus.RESOLVED):
        raise TransitionRefused("Review an incident once it is mitigated or resolved, before closing it.")
    errors = {}
    if not (cause or "").strip():
        errors["cause"] = "Say why it happened."
    if not (prevention or "").strip():
        errors["prevention"] = "Say how to avoid it."
    if errors:
        raise ValidationError(errors)
    locked.cause, locked.prevention, locked.reviewed_at = cause.strip(), prevention.strip(), now
    locked.save()
    created = [add_follow_up(locked, actor, **item) for item in follow_ups]
    _timeline(locked, actor, TimelineKind.REVIEW, "Review recorded.", at=now,
              data={"follow_ups": [f.title for f in created]})
    record(actor, "oncall.incident.review", locked, changes={"cause": locked.cause[:500], "prevention": locked.prevention[:500]})
    incident.refresh_from_db()
    return incident


@transaction.atomic
def add_follow_up(incident, actor, *, title, owner=None, due_date=None, link=""):
    if not (title or "").strip():
        raise ValidationError({"follow_ups.title": "A follow-up needs a title."})
    if owner is not None and not responders_of(incident.rotation).filter(pk=owner.pk).exists():
        raise ValidationError({"follow_ups.owner": f"{owner} is neither a DRI of this rotation nor a platform admin."})
    follow_up = FollowUp(incident=incident, title=title.strip()[:200], owner=owner, due_date=due_date, link=link or "")
    try:
        follow_up.full_clean(exclude=["incident"])
    except ValidationError as exc:
        raise ValidationError({f"follow_ups.{k}": v for k, v in exc.message_dict.items()}) from None
    follow_up.save()
    record(actor, "oncall.follow_up.add", follow_up, changes={"incident": incident.pk, "title": follow_up.title})
    return follow_up


@transaction.atomic
def complete_follow_up(follow_up, actor, *, now=None):
    _locked(follow_up.incident, actor)
    if not follow_up.done:
        follow_up.done, follow_up.done_at = True, now or timezone.now()
        follow_up.save(update_fields=["done", "done_at"])
        record(actor, "oncall.follow_up.done", follow_up, changes={"done": [False, True]})
    return follow_up


# --- The SLA sweep --------------------------------------------------------------------


def _team_admins(rotation):
    """The admins of the team that runs the rotation: its tenant's, or the platform's."""
    if rotation is not None and rotation.tenant_id:
        return list(User.objects.filter(
            memberships__tenant_id=rotation.tenant_id, memberships__role=Membership.Role.ADMIN, is_active=True
        ))
    return list(User.objects.filter(groups__name=ADMIN_GROUP, is_active=True))


def _backup_dris(rotation, assignees, now):
    """Who to escalate to: the other DRI of the shift, or, with one DRI per shift, the next shift's."""
    if rotation is None:
        return [u for u in current_dris(now) if u not in assignees]
    others = [u for u in rotation_dris(rotation, now) if u not in assignees]
    if others:
        return others
    plan = rotation.plan()
    index = plan.shift_index_at(now)
    upcoming = plan.shift_start(0 if index is None else index + 1)
    return [u for u in rotation_dris(rotation, upcoming) if u not in assignees]


def _escalate(incident, kind, deadline, now):
    """Remind, then escalate, each step once per deadline, when its time (in monitoring hours) has come."""
    calendar = incident.sla_calendar()
    step = timedelta(seconds=incident.sla["escalate_after_seconds"])
    what = "acknowledge" if kind == "ack" else "post an update on"
    assignees = list(incident.assignees.all())
    base = f"incident:{incident.pk}:{kind}:{deadline.isoformat()}"
    url = incident_url(incident)
    sent = 0
    if _notify(
        f"{base}:remind", NotificationKind.REMIND, assignees,
        f"[pai] SLA missed: {what} {incident}",
        f"The deadline to {what} {incident} (severity {incident.severity}) passed at {deadline:%Y-%m-%d %H:%M} UTC.\n{url}",
        incident=incident,
    ):
        sent += 1
        if kind == "ack":
            incident.ack_breached_at = incident.ack_breached_at or deadline
        else:
            incident.update_breaches += 1
            incident.update_breached_at = incident.update_breached_at or deadline
        incident.save(update_fields=["ack_breached_at", "update_breaches", "update_breached_at"])
        _timeline(incident, None, TimelineKind.SLA, f"SLA missed: nobody did {what.split()[0]} by the deadline.",
                  data={"deadline": deadline.isoformat(), "kind": kind}, at=now)
    if now >= calendar.add(deadline, step):
        others = _backup_dris(incident.rotation, assignees, now)
        if _notify(
            f"{base}:escalate_dri", NotificationKind.ESCALATE_DRI, others,
            f"[pai] Escalated to you: {incident}",
            f"The assignees of {incident} have not reacted since {deadline:%Y-%m-%d %H:%M} UTC. Please take it.\n{url}",
            incident=incident,
        ):
            sent += 1
    if now >= calendar.add(deadline, 2 * step):
        if _notify(
            f"{base}:escalate_admins", NotificationKind.ESCALATE_ADMINS, _team_admins(incident.rotation),
            f"[pai] Escalated to team admins: {incident}",
            f"Neither the assignees nor the other DRI reacted to {incident} since {deadline:%Y-%m-%d %H:%M} UTC.\n{url}",
            incident=incident,
        ):
            sent += 1
    return sent


# How far ahead the sweep looks for deadlines to remind of; `remind_before` is shorter.
REMINDER_HORIZON = timedelta(days=2)


def _remind_before_deadlines(now):
    """Tell the assignees, once per deadline, that it comes within the row's `remind_before`."""
    sent = 0
    soon = Incident.objects.filter(sla__isnull=False).filter(
        Q(status=IncidentStatus.TRIGGERED, ack_deadline__gt=now, ack_deadline__lte=now + REMINDER_HORIZON)
        | Q(status__in=[IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED],
            next_update_deadline__gt=now, next_update_deadline__lte=now + REMINDER_HORIZON)
    ).prefetch_related("assignees")
    for incident in soon:
        kind, deadline = incident.current_deadline()
        before = timedelta(seconds=incident.sla.get("remind_before_seconds", 600))
        if incident.sla_calendar().elapsed(now, deadline) > before:
            continue
        what = "acknowledge" if kind == "ack" else "post an update on"
        sent += _notify(
            f"incident:{incident.pk}:{kind}:{deadline.isoformat()}:due_soon", NotificationKind.DUE_SOON,
            list(incident.assignees.all()), f"[pai] Due soon: {what} {incident}",
            f"The deadline to {what} {incident} (severity {incident.severity}) is {deadline:%Y-%m-%d %H:%M} UTC.\n"
            f"{incident_url(incident)}",
            incident=incident,
        )
    return sent


def run_sla_sweep(now=None):
    """Mark breaches, remind and escalate, remind before deadlines, page what is not paged yet,
    remind overdue follow-ups. Safe to run any number of times."""
    now = now or timezone.now()
    sent = 0
    due = Incident.objects.filter(sla__isnull=False).filter(
        Q(status=IncidentStatus.TRIGGERED, ack_deadline__lte=now)
        | Q(status__in=[IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED], next_update_deadline__lte=now)
    )
    for pk in due.values_list("pk", flat=True):
        with transaction.atomic():
            incident = Incident.objects.select_for_update(of=("self",)).select_related("rotation").get(pk=pk)
            current = incident.current_deadline()
            if current is None or current[1] > now:
                continue
            sent += _escalate(incident, current[0], current[1], now)
    sent += _remind_before_deadlines(now)
    sent += paging.page_open_incidents(now)
    today = timezone.localdate(now)
    overdue = FollowUp.objects.filter(done=False, due_date__lt=today, owner__isnull=False).select_related("incident", "owner")
    for follow_up in overdue:
        sent += _notify(
            f"follow-up:{follow_up.pk}:{follow_up.due_date.isoformat()}", NotificationKind.FOLLOW_UP, [follow_up.owner],
            f"[pai] Overdue follow-up: {follow_up.title}",
            f"The follow-up '{follow_up.title}' of {follow_up.incident} was due on {follow_up.due_date}.\n"
            f"{follow_up.link or incident_url(follow_up.incident)}",
            incident=follow_up.incident, follow_up=follow_up,
        )
    return sent


# --- Alert intake ---------------------------------------------------------------------

SEVERITY_NAMES = {"critical": 1, "page": 1, "error": 2, "warning": 2, "info": 3, "none": 3}


def _severity_from_labels(labels):
    value = str(labels.get("severity", "")).strip().lower()
    if value in {"0", "1", "2", "3"}:
        return int(value)
    return SEVERITY_NAMES.get(value, Severity.SEV2)


def _route(labels):
    for route in AlertRoute.objects.filter(active=True).select_related("cluster"):
        if route.matches(labels):
            return route
    return None


def _parse_time(value, field):
    if not value:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise ValidationError({field: f"Not an RFC 3339 time: {value!r}."})
    # Alertmanager's "zero" time (0001-01-01) means "not set".
    return None if parsed.year < 1970 else parsed


def _text_problem(value):
    """Why the database cannot store `value` (NUL characters, lone surrogates), or None."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate"
    return None


def _clean_map(value, field):
    cleaned = {str(k): str(v) for k, v in value.items()}
    for key, text in cleaned.items():
        problem = _text_problem(key) or _text_problem(text)
        if problem:
            raise ValidationError({f"{field}.{key!r}": f"The label or annotation {problem}."})
    return cleaned


def _clean_alert(i, alert):
    if not isinstance(alert, dict):
        raise ValidationError({f"alerts[{i}]": "Expected an object."})
    status = alert.get("status")
    if status not in AlertStatus.values:
        raise ValidationError({f"alerts[{i}].status": "Expected 'firing' or 'resolved'."})
    labels = alert.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise ValidationError({f"alerts[{i}].labels": "Expected a non-empty object of labels."})
    annotations = alert.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise ValidationError({f"alerts[{i}].annotations": "Expected an object."})
    labels = _clean_map(labels, f"alerts[{i}].labels")
    fingerprint = str(alert.get("fingerprint") or "") or hashlib.sha256(
        json.dumps(labels, sort_keys=True).encode()
    ).hexdigest()[:16]
    for field, text in (("generatorURL", str(alert.get("generatorURL") or "")), ("fingerprint", fingerprint)):
        problem = _text_problem(text)
        if problem:
            raise ValidationError({f"alerts[{i}].{field}": f"The value {problem}."})
    return {
        "status": status,
        "labels": labels,
        "annotations": _clean_map(annotations, f"alerts[{i}].annotations"),
        "starts_at": _parse_time(alert.get("startsAt"), f"alerts[{i}].startsAt"),
        "ends_at": _parse_time(alert.get("endsAt"), f"alerts[{i}].endsAt"),
        "generator_url": str(alert.get("generatorURL") or "")[:1000],
        "fingerprint": fingerprint[:64],
    }


def _delivery_alerts(payload):
    if not isinstance(payload, dict):
        raise ValidationError({"body": "Expected Alertmanager's webhook JSON object."})
    alerts = payload.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise ValidationError({"alerts": "Expected a non-empty list of alerts."})
    # What an incident's title and alerts take from the delivery itself.
    for field in ("receiver", "groupLabels", "commonAnnotations"):
        value = payload.get(field)
        if isinstance(value, dict):
            _clean_map(value, field)
        elif isinstance(value, str) and _text_problem(value):
            raise ValidationError({field: f"The value {_text_problem(value)}."})
    return alerts


def _clean_alerts(payload):
    return [_clean_alert(i, alert) for i, alert in enumerate(_delivery_alerts(payload))]


def split_alertmanager_delivery(payload):
    """(the delivery with its usable alerts only, the problems of the others): one bad alert
    must not fail the whole delivery, which Alertmanager would then retry forever.
    ValidationError when no alert is usable or the delivery itself is not."""
    alerts = _delivery_alerts(payload)
    good, problems = [], []
    for i, alert in enumerate(alerts):
        try:
            _clean_alert(i, alert)
        except ValidationError as exc:
            problems += [f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()]
        else:
            good.append(alert)
    if not good:
        raise ValidationError({"alerts": problems})
    return {**payload, "alerts": good}, problems


def group_key_of(payload, alerts):
    """The grouping key: Alertmanager's `groupKey` (its route and group labels), hashed to fit."""
    raw = payload.get("groupKey")
    if not raw:
        raw = json.dumps(payload.get("groupLabels") or alerts[0]["labels"], sort_keys=True)
    return hashlib.sha256(str(raw).encode()).hexdigest()


def _incident_for_group(key, payload, alerts, now):
    """The open incident of the group, opening it if needed; a concurrent opener wins cleanly."""
    existing = Incident.objects.open().filter(group_key=key).first()
    if existing is not None:
        return existing
    labels = next(a for a in alerts if a["status"] == AlertStatus.FIRING)["labels"]
    annotations = next(a for a in alerts if a["status"] == AlertStatus.FIRING)["annotations"]
    common = payload.get("commonAnnotations") or {}
    route = _route(labels)
    cluster = route.cluster if route and route.cluster else Cluster.objects.filter(name=labels.get("cluster", "")).first()
    name = labels.get("alertname", "Alert")
    group_labels = payload.get("groupLabels") or {}
    suffix = ", ".join(f"{k}={v}" for k, v in sorted(group_labels.items()) if k != "alertname")
    title = annotations.get("summary") or common.get("summary") or (f"{name} ({suffix})" if suffix else name)
    try:
        with transaction.atomic():
            return open_incident(
                title=title,
                description=annotations.get("description") or common.get("description", ""),
                severity=route.severity if route else _severity_from_labels(labels),
                source=IncidentSource.ALERT,
                cluster=cluster,
                group_key=key,
                auto_mitigate=bool(route and route.auto_mitigate),
                now=now,
            )
    except IntegrityError:
        # Another delivery of the same group opened it first (unique open group key).
        return Incident.objects.open().get(group_key=key)


def _apply_alert(incident, alert, receiver, now):
    row = incident.alerts.filter(fingerprint=alert["fingerprint"]).first()
    fields = {
        "status": alert["status"], "labels": alert["labels"], "annotations": alert["annotations"],
        "starts_at": alert["starts_at"], "ends_at": alert["ends_at"] if alert["status"] == AlertStatus.RESOLVED else None,
        "generator_url": alert["generator_url"], "receiver": receiver[:200],
    }
    changed = False
    if row is None:
        try:
            with transaction.atomic():
                row = Alert.objects.create(incident=incident, fingerprint=alert["fingerprint"], **fields)
                changed = True
        except IntegrityError:
            row = incident.alerts.get(fingerprint=alert["fingerprint"])
    if not changed:
        changed = row.status != alert["status"]
        # Only the delivery that changes the status writes it, so a repeat is silent.
        updated = Alert.objects.filter(pk=row.pk).exclude(status=alert["status"]).update(**fields, last_seen=now)
        changed = changed and updated == 1
        if not changed:
            Alert.objects.filter(pk=row.pk).update(annotations=alert["annotations"], last_seen=now)
    if changed:
        name = alert["labels"].get("alertname", alert["fingerprint"])
        firing = alert["status"] == AlertStatus.FIRING
        _timeline(
            incident, None, TimelineKind.ALERT_FIRING if firing else TimelineKind.ALERT_RESOLVED,
            f"Alert {name} {'firing' if firing else 'resolved'}.", at=now,
            data={"fingerprint": alert["fingerprint"], "labels": alert["labels"]},
        )
    return changed


@transaction.atomic
def ingest_alertmanager(payload, now=None):
    """Apply one Alertmanager webhook delivery. Returns the incident it touched, or None.

    A resolved-only delivery for a group with no open incident is ignored: there is
    nothing to annotate.
    """
    now = now or timezone.now()
    alerts = _clean_alerts(payload)
    key = group_key_of(payload, alerts)
    if not any(a["status"] == AlertStatus.FIRING for a in alerts):
        incident = Incident.objects.open().filter(group_key=key).first()
        if incident is None:
            return None
    else:
        incident = _incident_for_group(key, payload, alerts, now)
    receiver = str(payload.get("receiver") or "")
    for alert in alerts:
        _apply_alert(incident, alert, receiver, now)
    incident.refresh_from_db()
    all_resolved = not incident.alerts.filter(status=AlertStatus.FIRING).exists()
    if incident.auto_mitigate and all_resolved and incident.status in (IncidentStatus.TRIGGERED, IncidentStatus.ACKNOWLEDGED):
        _transition(incident, None, IncidentStatus.MITIGATED, "All alerts resolved.", now=now, action="mitigate")
    return incident


def firing_alerts_for(user):
    return Alert.objects.visible_to(user).firing().select_related("incident").order_by("-starts_at", "-id")
