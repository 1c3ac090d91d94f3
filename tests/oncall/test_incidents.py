"""Incident life cycle: every transition, the refused ones, timeline, audit, SLA snapshot."""

from datetime import datetime, timedelta, timezone

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.audit.models import AuditEntry
from apps.oncall import services
from apps.oncall.choices import IncidentSource, IncidentStatus, TimelineKind
from apps.oncall.models import SlaPolicy, TimelineEntry

UTC = timezone.utc
TUESDAY_10 = datetime(2026, 1, 6, 10, 0, tzinfo=UTC)  # alice's shift, inside working hours

S = IncidentStatus


def open_one(world, severity=1, now=TUESDAY_10, **kwargs):
    kwargs.setdefault("cluster", world.cluster)
    return services.open_incident(title="API down", severity=severity, source=IncidentSource.DRI, now=now, **kwargs)


def drive(incident, actor, target, now=TUESDAY_10):
    """Walk an incident along the main path to `target`."""
    path = [S.ACKNOWLEDGED, S.MITIGATED, S.RESOLVED, S.CLOSED]
    for status in path[: path.index(target) + 1]:
        if status == S.ACKNOWLEDGED:
            services.acknowledge(incident, actor, now=now)
        elif status == S.MITIGATED:
            services.mitigate(incident, actor, now=now)
        elif status == S.RESOLVED:
            services.resolve(incident, actor, now=now)
        else:
            services.record_review(incident, actor, cause="disk full", prevention="alert on disk usage")
            services.close(incident, actor, now=now)
    return incident


def test_opening_snapshots_the_sla_and_assigns_the_current_dri(oncall):
    incident = open_one(oncall)
    assert incident.status == S.TRIGGERED
    assert list(incident.assignees.all()) == [oncall.alice]
    assert incident.cluster_class == "production"
    assert incident.sla["name"] == "Severity 0–1, production"
    assert incident.ack_deadline == TUESDAY_10 + timedelta(minutes=30)
    assert incident.timeline.get().kind == TimelineKind.OPENED
    assert AuditEntry.objects.filter(action="oncall.incident.open", object_id=str(incident.pk)).exists()


def test_policy_edits_do_not_move_running_clocks(oncall):
    incident = open_one(oncall)
    SlaPolicy.objects.filter(name="Severity 0–1, production").update(ack_within=timedelta(hours=8))
    services.acknowledge(incident, oncall.alice, now=TUESDAY_10 + timedelta(minutes=5))
    incident.refresh_from_db()
    assert incident.sla["ack_within_seconds"] == 1800
    assert incident.next_update_deadline == TUESDAY_10 + timedelta(minutes=5, hours=2)
    # A new incident takes the edited row.
    assert open_one(oncall).ack_deadline == TUESDAY_10 + timedelta(hours=8)


def test_severity_three_uses_the_all_clusters_row_and_non_production_has_no_row_for_severity_one(oncall):
    assert open_one(oncall, severity=3).sla["name"] == "Severity 3, all clusters"
    # Without a cluster, the strictest row for the severity applies.
    assert open_one(oncall, severity=1, cluster=None).sla["name"] == "Severity 0–1, production"
    oncall.cluster.cluster_class = "non-production"
    oncall.cluster.save()
    incident = open_one(oncall, severity=1)
    assert incident.sla is None and incident.ack_deadline is None and incident.countdown() is None


def test_main_path_stamps_each_status_and_writes_timeline_and_audit(oncall):
    incident = open_one(oncall)
    for minutes, (fn, status, stamp) in enumerate([
        (services.acknowledge, S.ACKNOWLEDGED, "acknowledged_at"),
        (services.mitigate, S.MITIGATED, "mitigated_at"),
        (services.resolve, S.RESOLVED, "resolved_at"),
    ], start=1):
        at = TUESDAY_10 + timedelta(minutes=minutes)
        fn(incident, oncall.alice, now=at)
        incident.refresh_from_db()
        assert incident.status == status and getattr(incident, stamp) == at
    assert incident.acknowledged_by == oncall.alice
    assert incident.next_update_deadline is None  # no updates owed once resolved
    services.record_review(incident, oncall.alice, cause="a bad deploy", prevention="canary first",
                           follow_ups=[{"title": "Add a canary stage", "owner": oncall.bob, "link": "https://example.com/issues/1"}])
    services.close(incident, oncall.alice, now=TUESDAY_10 + timedelta(hours=1))
    incident.refresh_from_db()
    assert incident.status == S.CLOSED and incident.closed_at == TUESDAY_10 + timedelta(hours=1)
    transitions = incident.timeline.filter(kind=TimelineKind.TRANSITION)
    assert [(t.from_status, t.to_status) for t in transitions] == [
        ("triggered", "acknowledged"), ("acknowledged", "mitigated"), ("mitigated", "resolved"), ("resolved", "closed"),
    ]
    assert all(t.actor == oncall.alice for t in transitions)
    assert incident.follow_ups.get().owner == oncall.bob
    actions = set(AuditEntry.objects.filter(object_id=str(incident.pk), object_type="oncall.incident").values_list("action", flat=True))
    assert {"oncall.incident.acknowledge", "oncall.incident.mitigate", "oncall.incident.resolve",
            "oncall.incident.review", "oncall.incident.close"} <= actions


def test_shortcuts_allowed_by_the_life_cycle(oncall):
    straight_to_resolved = drive(open_one(oncall), oncall.alice, S.ACKNOWLEDGED)
    services.resolve(straight_to_resolved, oncall.alice)
    assert straight_to_resolved.status == S.RESOLVED
    mitigated_unacked = open_one(oncall)
    services.mitigate(mitigated_unacked, oncall.alice)
    assert mitigated_unacked.status == S.MITIGATED and mitigated_unacked.acknowledged_at is None


REFUSED = [
    (S.TRIGGERED, services.resolve),
    (S.TRIGGERED, services.close),
    (S.ACKNOWLEDGED, services.acknowledge),
    (S.ACKNOWLEDGED, services.close),
    (S.MITIGATED, services.acknowledge),
    (S.MITIGATED, services.mitigate),
    (S.MITIGATED, services.close),
    (S.RESOLVED, services.acknowledge),
    (S.RESOLVED, services.mitigate),
    (S.RESOLVED, services.resolve),
    (S.CLOSED, services.acknowledge),
    (S.CLOSED, services.mitigate),
    (S.CLOSED, services.resolve),
    (S.CLOSED, services.close),
]


@pytest.mark.parametrize("status, fn", REFUSED, ids=[f"{s}-{fn.__name__}" for s, fn in REFUSED])
def test_refused_transitions_change_nothing(oncall, status, fn):
    incident = open_one(oncall)
    if status != S.TRIGGERED:
        drive(incident, oncall.alice, status)
    entries = TimelineEntry.objects.filter(incident=incident).count()
    with pytest.raises(services.TransitionRefused):
        fn(incident, oncall.alice)
    incident.refresh_from_db()
    assert incident.status == status
    assert TimelineEntry.objects.filter(incident=incident).count() == entries


def test_close_needs_the_review(oncall):
    incident = drive(open_one(oncall), oncall.alice, S.RESOLVED)
    with pytest.raises(ValidationError) as refused:
        services.close(incident, oncall.alice)
    assert set(refused.value.message_dict) == {"cause", "prevention"}
    with pytest.raises(ValidationError):
        services.record_review(incident, oncall.alice, cause=" ", prevention="x")
    incident.refresh_from_db()
    assert incident.status == S.RESOLVED and incident.reviewed_at is None


def test_review_is_refused_before_mitigation(oncall):
    incident = drive(open_one(oncall), oncall.alice, S.ACKNOWLEDGED)
    with pytest.raises(services.TransitionRefused):
        services.record_review(incident, oncall.alice, cause="c", prevention="p")


def test_updates_restart_the_update_clock_and_need_an_ack(oncall):
    incident = open_one(oncall)
    with pytest.raises(services.TransitionRefused):
        services.post_update(incident, oncall.alice, "looking")
    services.acknowledge(incident, oncall.alice, now=TUESDAY_10)
    later = TUESDAY_10 + timedelta(hours=1)
    services.post_update(incident, oncall.alice, "rolled back the API pods", now=later)
    incident.refresh_from_db()
    assert incident.last_update_at == later
    assert incident.next_update_deadline == later + timedelta(hours=2)
    assert incident.timeline.filter(kind=TimelineKind.UPDATE).get().message == "rolled back the API pods"
    with pytest.raises(ValidationError):
        services.post_update(incident, oncall.alice, "   ")


def test_timeline_is_append_only(oncall):
    entry = open_one(oncall).timeline.get()
    entry.message = "rewritten"
    with pytest.raises(ValueError):
        entry.save()
    with pytest.raises(ValueError):
        entry.delete()


def test_only_responders_act(oncall):
    incident = open_one(oncall)
    with pytest.raises(PermissionDenied):
        services.acknowledge(incident, oncall.a_member)
    services.acknowledge(incident, oncall.root)  # platform admins may
    assert incident.status == S.ACKNOWLEDGED


def test_user_report_proposes_and_dri_confirms_severity(oncall):
    report = services.report_incident(oncall.a_member, title="My jobs keep failing", severity=1, cluster=oncall.cluster)
    assert report.source == IncidentSource.USER and not report.severity_confirmed and report.proposed_severity == 1
    with pytest.raises(PermissionDenied):
        services.confirm_severity(report, oncall.a_member, 0)
    services.confirm_severity(report, oncall.alice, 2)
    report.refresh_from_db()
    assert report.severity == 2 and report.severity_confirmed and report.proposed_severity == 1
    assert report.sla["name"] == "Severity 2, production"
    assert report.ack_deadline == services.SlaPolicy.matching(2, "production").calendar.as_clock().add(
        report.triggered_at, timedelta(hours=2))
    with pytest.raises(ValidationError):
        services.confirm_severity(report, oncall.alice, 7)
    declared = services.report_incident(oncall.bob, title="Planned upgrade broke DNS", severity=1)
    assert declared.source == IncidentSource.DRI and declared.severity_confirmed


def test_bad_input_names_the_field(oncall):
    with pytest.raises(ValidationError) as bad:
        services.open_incident(title="", severity=1, source="dri")
    assert "title" in bad.value.message_dict
    with pytest.raises(ValidationError) as bad:
        services.open_incident(title="x", severity=9, source="dri")
    assert "severity" in bad.value.message_dict


def test_follow_up_completion(oncall):
    incident = drive(open_one(oncall), oncall.alice, S.RESOLVED)
    services.record_review(incident, oncall.alice, cause="c", prevention="p", follow_ups=[{"title": "Fix it"}])
    follow_up = incident.follow_ups.get()
    with pytest.raises(PermissionDenied):
        services.complete_follow_up(follow_up, oncall.b_member)
    services.complete_follow_up(follow_up, oncall.bob)
    follow_up.refresh_from_db()
    assert follow_up.done and follow_up.done_at
    with pytest.raises(ValidationError) as bad:
        services.add_follow_up(incident, oncall.alice, title="Link", link="not a url")
    assert "follow_ups.link" in bad.value.message_dict
