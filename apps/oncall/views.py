"""The pages DRIs work in. Thin: querysets through visible_to, actions through services."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from . import github, reports, services
from .choices import OPEN_STATUSES, IncidentStatus
from .forms import IncidentFilterForm, IncidentReportForm, NoteForm, OverrideForm, ReviewForm, SeverityForm, UpdateForm
from .models import FollowUp, GitHubRepository, Incident, Rotation
from .querysets import is_responder


@login_required
def incident_list(request):
    form = IncidentFilterForm(request.GET or None)
    incidents = (
        Incident.objects.visible_to(request.user)
        .select_related("cluster", "reporter")
        .prefetch_related("assignees")
    )
    filters = form.cleaned_data if form.is_valid() else {}
    status = filters.get("status", "")
    if status == "":
        incidents = incidents.filter(status__in=OPEN_STATUSES)
    elif status != "all":
        incidents = incidents.filter(status=status)
    for field in ("severity", "cluster_class", "source"):
        if filters.get(field) not in (None, ""):
            incidents = incidents.filter(**{field: filters[field]})
    now = timezone.now()
    rows = [(incident, incident.countdown(now)) for incident in incidents[:200]]
    return render(request, "oncall/incident_list.html", {
        "form": form, "rows": rows, "responder": is_responder(request.user),
    })


@login_required
def status_page(request):
    """Read-only: what is broken right now on the clusters the user works on."""
    incidents = (
        Incident.objects.on_status_page_of(request.user).select_related("cluster").order_by("severity", "-triggered_at")
    )
    return render(request, "oncall/status.html", {"incidents": incidents[:200]})


@login_required
def incident_new(request):
    form = IncidentReportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            incident = services.report_incident(request.user, **form.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Incident #{incident.pk} opened; the DRIs on call are notified on the page.")
            return redirect("oncall:incident-detail", pk=incident.pk)
    return render(request, "oncall/incident_new.html", {"form": form})


@login_required
def incident_detail(request, pk, review_form=None):
    incident = get_object_or_404(
        Incident.objects.visible_to(request.user).select_related("cluster", "reporter", "acknowledged_by", "rotation"),
        pk=pk,
    )
    can_act = Incident.objects.manageable_by(request.user).filter(pk=pk).exists()
    status = incident.status
    return render(request, "oncall/incident_detail.html", {
        "incident": incident,
        "countdown": incident.countdown(),
        "timeline": incident.timeline.select_related("actor"),
        "alerts": incident.alerts.all(),
        "follow_ups": incident.follow_ups.select_related("owner"),
        "github": GitHubRepository.current(),
        "assignees": incident.assignees.all(),
        "can_act": can_act,
        "can_confirm": is_responder(request.user) and not incident.severity_confirmed and status != IncidentStatus.CLOSED,
        "actions": services.TRANSITIONS[IncidentStatus(status)],
        "Status": IncidentStatus,
        "update_form": UpdateForm(),
        "note_form": NoteForm(),
        "severity_form": SeverityForm(initial={"severity": incident.severity}),
        "review_form": review_form or ReviewForm(
            initial={"cause": incident.cause, "prevention": incident.prevention}, rotation=incident.rotation
        ),
        # Closing means the review is done: offered once it is written.
        "can_close": status == IncidentStatus.RESOLVED and bool(incident.cause.strip() and incident.prevention.strip()),
        "can_update": status in (IncidentStatus.ACKNOWLEDGED, IncidentStatus.MITIGATED, IncidentStatus.RESOLVED),
        "can_review": status in (IncidentStatus.MITIGATED, IncidentStatus.RESOLVED),
    })


ACTIONS = {
    "acknowledge": (services.acknowledge, None, "Acknowledged."),
    "update": (services.post_update, UpdateForm, "Update posted."),
    "mitigate": (services.mitigate, NoteForm, "Marked mitigated."),
    "resolve": (services.resolve, NoteForm, "Resolved."),
    "close": (services.close, None, "Closed."),
    "confirm-severity": (services.confirm_severity, SeverityForm, "Severity confirmed."),
}


@login_required
@require_POST
def incident_action(request, pk, action):
    incident = get_object_or_404(Incident.objects.visible_to(request.user), pk=pk)
    if action == "review":
        return _review(request, incident)
    if action not in ACTIONS:
        return render(request, "oncall/error.html", {"message": f"Unknown action '{action}'."}, status=404)
    fn, form_class, done = ACTIONS[action]
    kwargs = {}
    if form_class is not None:
        form = form_class(request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                messages.error(request, f"{field}: {' '.join(errors)}")
            return redirect("oncall:incident-detail", pk=pk)
        kwargs = form.cleaned_data
    try:
        fn(incident, request.user, **kwargs)
    except PermissionDenied as exc:
        return render(request, "oncall/error.html", {"message": str(exc)}, status=403)
    except services.TransitionRefused as exc:
        messages.error(request, str(exc))
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
    else:
        messages.success(request, done)
    return redirect("oncall:incident-detail", pk=pk)


def _error_text(exc):
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
    return " ".join(exc.messages)


def _review(request, incident):
    form = ReviewForm(request.POST, rotation=incident.rotation)
    if form.is_valid():
        try:
            services.record_review(
                incident, request.user, cause=form.cleaned_data["cause"],
                prevention=form.cleaned_data["prevention"], follow_ups=form.follow_ups(),
            )
        except PermissionDenied as exc:
            return render(request, "oncall/error.html", {"message": str(exc)}, status=403)
        except services.TransitionRefused as exc:
            messages.error(request, str(exc))
        except ValidationError as exc:
            # On the form, beside the field it concerns.
            for field, errors in exc.message_dict.items():
                name = {"follow_ups.title": "follow_up_title", "follow_ups.owner": "follow_up_owner",
                        "follow_ups.link": "follow_up_link", "follow_ups.due_date": "follow_up_due"}.get(field, field)
                form.add_error(name if name in form.fields else None, errors)
        else:
            messages.success(request, "Review recorded.")
            return redirect("oncall:incident-detail", pk=incident.pk)
    return incident_detail(request, incident.pk, review_form=form)


@login_required
@require_POST
def follow_up_done(request, pk):
    follow_up = get_object_or_404(
        FollowUp.objects.filter(incident__in=Incident.objects.visible_to(request.user)), pk=pk
    )
    try:
        services.complete_follow_up(follow_up, request.user)
    except PermissionDenied as exc:
        return render(request, "oncall/error.html", {"message": str(exc)}, status=403)
    messages.success(request, f"Follow-up '{follow_up.title}' done.")
    return redirect("oncall:incident-detail", pk=follow_up.incident_id)


@login_required
@require_POST
def follow_up_github_issue(request, pk):
    """Ask for the follow-up's GitHub issue; a task creates it (and retries) after this answers."""
    follow_up = get_object_or_404(
        FollowUp.objects.filter(incident__in=Incident.objects.visible_to(request.user)), pk=pk
    )
    try:
        follow_up = github.request_issue(follow_up, request.user)
    except PermissionDenied as exc:
        return render(request, "oncall/error.html", {"message": str(exc)}, status=403)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("oncall:incident-detail", pk=follow_up.incident_id)
    if follow_up.issue_url:
        messages.success(request, f"Follow-up '{follow_up.title}' has its issue: {follow_up.issue_url}")
    else:
        messages.success(request, f"Creating a GitHub issue for follow-up '{follow_up.title}' in "
                                  f"{follow_up.issue_repository}.")
    return redirect("oncall:incident-detail", pk=follow_up.incident_id)


@login_required
def rotation_calendar(request, override_form=None, override_rotation=None):
    now = timezone.now()
    rotations = Rotation.objects.visible_to(request.user).select_related("tenant")
    on_call = services.on_call(now, rotations)
    calendars = []
    for rotation, dris in on_call:
        calendars.append({
            "rotation": rotation,
            "dris": dris,
            "shifts": services.upcoming_shifts(rotation, 8, now),
            "share": services.fair_share(rotation, now - timedelta(days=90), now),
            "override_form": override_form if rotation == override_rotation else OverrideForm(
                rotation=rotation, initial={"replaces": request.user.get_username()}
            ),
        })
    return render(request, "oncall/rotations.html", {"calendars": calendars, "now": now})


@login_required
@require_POST
def rotation_override(request, pk):
    rotation = get_object_or_404(Rotation.objects.visible_to(request.user), pk=pk)
    if not (Rotation.objects.manageable_by(request.user).filter(pk=pk).exists()
            or rotation.members.filter(user=request.user).exists()):
        # Refused before the form is read: who may not arrange cover learns that, not what the form lacked.
        return render(request, "oncall/error.html", {
            "message": "Only the rotation's managers, or the members concerned, change its shifts."}, status=403)
    form = OverrideForm(request.POST, rotation=rotation)
    if form.is_valid():
        try:
            services.add_override(rotation, request.user, **form.cleaned_data)
        except PermissionDenied as exc:
            return render(request, "oncall/error.html", {"message": str(exc)}, status=403)
        except ValidationError as exc:
            messages.error(request, _error_text(exc))
        else:
            data = form.cleaned_data
            messages.success(request, f"{data['user']} covers for {data['replaces']}.")
            return redirect("oncall:rotations")
    return rotation_calendar(request, override_form=form, override_rotation=rotation)


@login_required
def sla_dashboard(request):
    try:
        weeks = min(max(int(request.GET.get("weeks", 12)), 1), 104)
    except ValueError:
        weeks = 12
    start, end = reports.default_period(weeks=weeks)
    incidents = (
        Incident.objects.visible_to(request.user)
        .filter(triggered_at__gte=start, triggered_at__lt=end)
        .select_related("acknowledged_by")
    )
    report = reports.sla_report(incidents)
    sections = []
    for grouping, title, heading in reports.GROUPINGS:
        rows = report[grouping]
        sections.append({
            "key": grouping,
            "title": title,
            "heading": heading,
            "rows": rows,
            "charts": [
                {"metric": metric, "title": label, "unit": unit, "chart": reports.bar_chart(rows, metric)}
                for metric, label, unit in (
                    ("mtta", "MTTA", "min, wall clock"), ("mtta_monitoring", "MTTA", "min, monitoring hours"),
                    ("mttr", "MTTR", "min, wall clock"), ("mttr_monitoring", "MTTR", "min, monitoring hours"),
                    ("breach_rate", "Breach rate", "%"),
                )
            ],
        })
    return render(request, "oncall/dashboard.html", {
        "sections": sections, "weeks": weeks, "start": start, "end": end, "total": sum(row["count"] for row in report["severity"]),
    })
