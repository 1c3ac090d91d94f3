"""The on-call pages and admin: login, scoping, the action forms, the dashboard."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.oncall import services
from apps.oncall.choices import IncidentSource, IncidentStatus


@pytest.fixture
def on_shift(oncall):
    rotation = oncall.rotation
    rotation.start_date = (timezone.now() - timedelta(days=1)).date()
    rotation.handoff_weekday = rotation.start_date.weekday()
    rotation.save()
    return oncall


def open_alert_incident(world, title="GPU node down", severity=1):
    return services.open_incident(title=title, severity=severity, source=IncidentSource.ALERT, cluster=world.cluster)


PAGES = ["/oncall/", "/oncall/incidents/new/", "/oncall/rotations/", "/oncall/dashboard/"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_need_a_login(client, db, path):
    response = client.get(path)
    assert response.status_code == 302 and "login" in response["Location"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_render_for_a_member(client, on_shift, path):
    client.force_login(on_shift.a_member)
    assert client.get(path).status_code == 200


def test_list_shows_responders_everything_and_users_their_reports(client, on_shift):
    alert_incident = open_alert_incident(on_shift)
    report = services.report_incident(on_shift.a_member, title="Cannot submit jobs", severity=1)
    client.force_login(on_shift.a_member)
    page = client.get("/oncall/").content.decode()
    assert "Cannot submit jobs" in page and "GPU node down" not in page
    assert client.get(f"/oncall/incidents/{alert_incident.pk}/").status_code == 404
    client.force_login(on_shift.b_member)
    assert client.get(f"/oncall/incidents/{report.pk}/").status_code == 404
    client.force_login(on_shift.alice)
    page = client.get("/oncall/").content.decode()
    assert "Cannot submit jobs" in page and "GPU node down" in page
    assert "data-seconds-left" in page  # the live SLA countdowns


def test_list_filters(client, on_shift):
    open_alert_incident(on_shift, "sev one", 1)
    open_alert_incident(on_shift, "sev three", 3)
    client.force_login(on_shift.alice)
    page = client.get("/oncall/?severity=3").content.decode()
    assert "sev three" in page and "sev one" not in page
    page = client.get("/oncall/?status=resolved").content.decode()
    assert "sev three" not in page and "No incidents match." in page


def test_the_lists_refresh_themselves_and_the_forms_do_not(client, on_shift):
    """The incident list and the status page reload every minute (their own address, filters
    kept; no script needed); pages with forms being filled in never do."""
    incident = open_alert_incident(on_shift)
    client.force_login(on_shift.alice)
    refresh = '<meta http-equiv="refresh" content="60">'
    for path in ("/oncall/?severity=1", "/oncall/status/"):
        assert refresh in client.get(path).content.decode(), path
    for path in (f"/oncall/incidents/{incident.pk}/", "/oncall/incidents/new/", "/oncall/rotations/"):
        assert 'http-equiv="refresh"' not in client.get(path).content.decode(), path


def test_report_form_shows_severity_meanings_and_opens_a_report(client, on_shift):
    client.force_login(on_shift.a_member)
    form = client.get("/oncall/incidents/new/").content.decode()
    assert "a whole production cluster is unavailable" in form
    assert "random job failures with low probability" in form
    bad = client.post("/oncall/incidents/new/", {"title": "", "severity": "9"})
    assert bad.status_code == 200 and b"This field is required" in bad.content
    response = client.post("/oncall/incidents/new/", {"title": "Portal slow", "description": "", "severity": "2",
                                                      "cluster": on_shift.cluster.pk})
    incident = on_shift.a_member.reported_incidents.get()
    assert response.status_code == 302 and response["Location"] == f"/oncall/incidents/{incident.pk}/"
    assert incident.source == IncidentSource.USER and incident.proposed_severity == 2


def test_dri_works_an_incident_through_the_forms(client, on_shift):
    incident = services.report_incident(on_shift.a_member, title="Jobs fail on gpu-node-3", severity=2)
    url = f"/oncall/incidents/{incident.pk}/"
    client.force_login(on_shift.alice)
    page = client.get(url).content.decode()
    assert 'id="acknowledge"' in page and 'id="confirm-severity"' in page and "csrfmiddlewaretoken" in page
    steps = [
        ("confirm-severity", {"severity": "1"}),
        ("acknowledge", {}),
        ("update", {"message": "draining gpu-node-3"}),
        ("mitigate", {"message": "node cordoned"}),
        ("resolve", {"message": "GPU replaced"}),
        ("review", {"cause": "a failing GPU", "prevention": "run DCGM diagnostics nightly",
                    "follow_up_title": "Nightly DCGM run", "follow_up_owner": "bob", "follow_up_due": "2027-01-10",
                    "follow_up_link": "https://tracker.example/42"}),
        ("close", {}),
    ]
    for action, data in steps:
        response = client.post(f"{url}{action}/", data)
        assert response.status_code == 302, (action, response.content[:500])
    incident.refresh_from_db()
    assert incident.status == IncidentStatus.CLOSED and incident.severity == 1
    assert incident.follow_ups.get().owner == on_shift.bob
    page = client.get(url).content.decode()
    assert "draining gpu-node-3" in page and "run DCGM diagnostics nightly" in page and "Nightly DCGM run" in page


def test_refused_and_forbidden_actions(client, on_shift):
    incident = open_alert_incident(on_shift)
    url = f"/oncall/incidents/{incident.pk}/"
    client.force_login(on_shift.alice)
    response = client.post(f"{url}resolve/", follow=True)
    assert "Cannot resolve an incident that is triggered" in response.content.decode()
    assert client.post(f"{url}explode/").status_code == 404
    assert client.get(f"{url}acknowledge/").status_code == 405
    services.acknowledge(incident, on_shift.alice)
    response = client.post(f"{url}update/", {"message": ""}, follow=True)
    assert "message: This field is required." in response.content.decode()
    report = services.report_incident(on_shift.a_member, title="mine", severity=3)
    client.force_login(on_shift.a_member)
    page = client.get(f"/oncall/incidents/{report.pk}/").content.decode()
    assert 'id="acknowledge"' not in page
    assert client.post(f"/oncall/incidents/{report.pk}/acknowledge/").status_code == 403
    report.refresh_from_db()
    assert report.status == IncidentStatus.TRIGGERED


def test_review_form_errors_are_shown(client, on_shift):
    incident = open_alert_incident(on_shift)
    services.acknowledge(incident, on_shift.alice)
    services.resolve(incident, on_shift.alice)
    client.force_login(on_shift.alice)
    response = client.post(f"/oncall/incidents/{incident.pk}/review/", {"cause": "", "prevention": "p", "follow_up_link": "x"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "This field is required." in body and "Enter a valid URL." in body


def test_rotation_calendar_shows_who_is_on_call_and_fair_share(client, on_shift):
    client.force_login(on_shift.b_member)
    page = client.get("/oncall/rotations/").content.decode()
    assert "On call now:</strong>\n    alice" in page
    assert page.count("<tr") >= 8 + 2


def test_dashboard_draws_charts_per_grouping(client, on_shift):
    for severity in (0, 1, 3):
        incident = open_alert_incident(on_shift, f"sev {severity}", severity)
        services.acknowledge(incident, on_shift.alice)
        services.resolve(incident, on_shift.alice)
    client.force_login(on_shift.alice)
    response = client.get("/oncall/dashboard/")
    page = response.content.decode()
    for grouping in ("by-severity", "by-cluster_class", "by-dri", "by-week"):
        assert f'id="{grouping}"' in page
    assert page.count('<svg class="chart"') == 20  # 4 groupings × MTTA and MTTR (wall, monitoring), breach rate
    assert page.count('class="bar"') >= 3 * 3
    assert response.context["total"] == 3
    # A plain member's dashboard only counts what the member may see.
    client.force_login(on_shift.a_member)
    assert client.get("/oncall/dashboard/").context["total"] == 0
    assert client.get("/oncall/dashboard/?weeks=abc").status_code == 200


ADMIN_MODELS = ["rotation", "rotationoverride", "monitoringcalendar", "slapolicy", "alertroute", "incident", "followup",
                "timelineentry", "alert", "notification"]


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_admin_is_for_platform_admins_only(client, on_shift, model):
    open_alert_incident(on_shift)
    client.force_login(on_shift.root)
    assert client.get(f"/admin/oncall/{model}/").status_code == 200
    client.force_login(on_shift.a_admin)  # staff, but a team admin
    assert client.get(f"/admin/oncall/{model}/").status_code in (302, 403)


def test_admin_edits_sla_rows_and_calendars(client, on_shift):
    from apps.oncall.models import MonitoringCalendar, SlaPolicy

    client.force_login(on_shift.root)
    calendar = MonitoringCalendar.objects.get(name="Working hours")
    policy = SlaPolicy.objects.get(name="Severity 2, production")
    assert client.get(f"/admin/oncall/slapolicy/{policy.pk}/change/").status_code == 200
    response = client.post(f"/admin/oncall/monitoringcalendar/{calendar.pk}/change/", {
        "name": "Working hours", "timezone": "Europe/Berlin", "weekdays": ["0", "1", "2", "3"],
        "start_time": "08:00", "end_time": "17:00",
        "holidays-TOTAL_FORMS": "1", "holidays-INITIAL_FORMS": "0", "holidays-MIN_NUM_FORMS": "0",
        "holidays-MAX_NUM_FORMS": "1000", "holidays-0-date": "2026-12-25", "holidays-0-name": "Christmas",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    calendar.refresh_from_db()
    assert calendar.weekdays == [0, 1, 2, 3] and calendar.timezone == "Europe/Berlin"
    assert calendar.holidays.get().name == "Christmas"
    bad = client.post(f"/admin/oncall/monitoringcalendar/{calendar.pk}/change/", {
        "name": "Working hours", "timezone": "Nowhere/Land", "weekdays": ["0"], "start_time": "18:00", "end_time": "08:00",
        "holidays-TOTAL_FORMS": "0", "holidays-INITIAL_FORMS": "1", "holidays-MIN_NUM_FORMS": "0", "holidays-MAX_NUM_FORMS": "1000",
    })
    assert bad.status_code == 200 and "is not an IANA time zone" in bad.content.decode()


def test_admin_edits_and_bulk_deletes_are_audited_one_row_per_object(client, on_shift):
    from apps.audit.models import AuditEntry
    from apps.oncall.models import SlaPolicy

    client.force_login(on_shift.root)
    policy = SlaPolicy.objects.get(name="Severity 2, production")
    url = f"/admin/oncall/slapolicy/{policy.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data["ack_within"] = "02:00:00"
    changed = client.post(url, data)
    assert changed.status_code == 302, changed.content.decode()[:2000]
    rows = list(SlaPolicy.objects.exclude(pk=policy.pk).values_list("pk", flat=True)[:2])
    deleted = client.post("/admin/oncall/slapolicy/", {"action": "delete_selected", "_selected_action": rows, "post": "yes"})
    assert deleted.status_code == 302 and not SlaPolicy.objects.filter(pk__in=rows).exists()

    audit = AuditEntry.objects.filter(object_type="oncall.slapolicy", actor=on_shift.root)
    assert list(audit.filter(action="admin.change.slapolicy").values_list("object_id", flat=True)) == [str(policy.pk)]
    assert sorted(audit.filter(action="admin.delete.slapolicy").values_list("object_id", flat=True)) == sorted(
        str(pk) for pk in rows)
    assert audit.count() == 3  # not also the generic row of admins that do not audit themselves


def test_rotation_calendar_shows_shifts_in_the_rotation_zone(client, on_shift):
    from apps.oncall.models import Rotation, RotationMember

    berlin = Rotation.objects.create(name="berlin", timezone="Europe/Berlin", handoff_weekday=0)
    RotationMember.objects.create(rotation=berlin, user=on_shift.bob)
    client.force_login(on_shift.alice)
    page = client.get("/oncall/rotations/").content.decode()
    section = page[page.index('id="rotation-%d"' % berlin.pk):]
    section = section[: section.index("</section>")]
    assert "From (Europe/Berlin)" in section
    assert section.count('">Mon ') == 16 and section.count(" 10:00</td>") == 16  # 8 shifts, local handoffs


def test_admin_change_pages_render(client, on_shift):
    incident = open_alert_incident(on_shift)
    client.force_login(on_shift.root)
    assert client.get(f"/admin/oncall/incident/{incident.pk}/change/").status_code == 200
    assert client.get(f"/admin/oncall/rotation/{on_shift.rotation.pk}/change/").status_code == 200
    assert client.get("/admin/oncall/alertroute/add/").status_code == 200
    assert client.get("/admin/oncall/incident/add/").status_code == 403  # incidents open through services


def test_member_arranges_cover_on_the_rotation_page(client, on_shift):
    url = f"/oncall/rotations/{on_shift.rotation.pk}/overrides/"
    now = timezone.now()
    window = {"starts_at": (now - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"),
              "ends_at": (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")}
    client.force_login(on_shift.a_member)
    assert client.post(url, {"user": "a_member", "replaces": "alice", **window}).status_code == 403
    client.force_login(on_shift.alice)
    page = client.get("/oncall/rotations/").content.decode()
    assert "Arrange cover" in page
    bad = client.post(url, {"user": "bob", "replaces": "alice", "starts_at": window["ends_at"], "ends_at": window["starts_at"]})
    assert bad.status_code == 200 and "ends_at: An override must end after it starts." in bad.content.decode()
    assert services.current_dris() == [on_shift.alice]
    invalid = client.post(url, {"user": "bob", "replaces": "nobody", **window})
    assert invalid.status_code == 200 and "Select a valid choice" in invalid.content.decode()
    response = client.post(url, {"user": "bob", "replaces": "alice", "reason": "doctor", **window}, follow=True)
    assert "bob covers for alice." in response.content.decode()
    assert services.current_dris() == [on_shift.bob]
    assert "On call now:</strong>\n    bob" in response.content.decode()


def test_status_page_shows_members_the_open_incidents_of_the_clusters_they_use(client, oncall):
    from tests import factories as f

    other = f.ClusterFactory(name="elsewhere")
    here = services.open_incident(title="Local cluster down", severity=0, source=IncidentSource.DRI, cluster=oncall.cluster)
    services.open_incident(title="Elsewhere down", severity=1, source=IncidentSource.DRI, cluster=other)
    services.open_incident(title="Sign-in broken everywhere", severity=1, source=IncidentSource.DRI)
    gone = services.open_incident(title="Old trouble", severity=2, source=IncidentSource.DRI, cluster=oncall.cluster)
    services.mitigate(gone, oncall.root)
    services.resolve(gone, oncall.root)
    client.force_login(oncall.a_member)
    page = client.get("/oncall/status/").content.decode()
    assert "Local cluster down" in page and "Sign-in broken everywhere" in page
    assert "Elsewhere down" not in page and "Old trouble" not in page
    # Read-only: a member sees no action and cannot open the incident itself.
    assert "<form" not in page.split('id="status"')[1].split("</table>")[0]
    assert client.get(f"/oncall/incidents/{here.pk}/").status_code == 404


def test_close_is_offered_only_once_the_review_is_written(client, on_shift):
    incident = open_alert_incident(on_shift)
    services.acknowledge(incident, on_shift.alice)
    services.resolve(incident, on_shift.alice)
    client.force_login(on_shift.alice)
    page = client.get(f"/oncall/incidents/{incident.pk}/").content.decode()
    assert 'id="close"' not in page and 'id="close-needs-review"' in page
    services.record_review(incident, on_shift.alice, cause="A bad rollout", prevention="Canary first")
    page = client.get(f"/oncall/incidents/{incident.pk}/").content.decode()
    assert 'id="close"' in page


def test_cover_and_follow_up_owners_are_rotation_members_or_platform_admins(client, on_shift):
    from django.core.exceptions import ValidationError

    incident = open_alert_incident(on_shift)
    services.acknowledge(incident, on_shift.alice)
    services.mitigate(incident, on_shift.alice)
    client.force_login(on_shift.alice)
    page = client.get(f"/oncall/incidents/{incident.pk}/")
    owners = {u.username for u in page.context["review_form"].fields["follow_up_owner"].queryset}
    assert owners == {"alice", "bob", "root"}
    # A Team A member is refused as owner, with the error on the form's field.
    response = client.post(f"/oncall/incidents/{incident.pk}/review/", {
        "cause": "c", "prevention": "p", "follow_up_title": "Fix it", "follow_up_owner": "a_member",
    })
    assert response.status_code == 200
    assert "follow_up_owner" in response.context["review_form"].errors
    calendar = client.get("/oncall/rotations/")
    covers = {u.username for u in calendar.context["calendars"][0]["override_form"].fields["user"].queryset}
    assert covers == {"alice", "bob", "root"}
    with pytest.raises(ValidationError):
        services.add_override(on_shift.rotation, on_shift.root, user=on_shift.a_member, replaces=on_shift.alice,
                              starts_at=timezone.now(), ends_at=timezone.now() + timedelta(days=1))


def test_dashboard_shows_mtta_and_mttr_in_wall_time_and_in_monitoring_hours(client, oncall):
    from datetime import datetime
    from datetime import timezone as dt_timezone

    # Opened Friday 17:00 UTC, acknowledged Monday 09:30: 64.5 hours of wall time, 90 minutes
    # of monitoring hours (Friday 17:00–18:00 and Monday 09:00–09:30).
    friday = datetime(2026, 1, 9, 17, 0, tzinfo=dt_timezone.utc)
    incident = services.open_incident(title="Slow", severity=2, source=IncidentSource.ALERT, cluster=oncall.cluster,
                                      now=timezone.now() - timedelta(days=2))
    incident.triggered_at = friday
    incident.save()
    services.acknowledge(incident, oncall.root, now=datetime(2026, 1, 12, 9, 30, tzinfo=dt_timezone.utc))
    from apps.oncall import reports

    [row] = reports.sla_report([type(incident).objects.get(pk=incident.pk)])["severity"]
    assert row["mtta"] == 64.5 * 60 and row["mtta_monitoring"] == 90.0
