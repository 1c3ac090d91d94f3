"""The on-call REST API: scoping, actions and their errors, rotations, who is on call, schema."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.oncall import services
from apps.oncall.choices import IncidentSource
from apps.oncall.models import RotationMember


def api(user=None):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def on_shift(oncall):
    """Make alice the DRI on call right now, whatever the date the suite runs."""
    now = timezone.now()
    rotation = oncall.rotation
    rotation.start_date = (now - timedelta(days=1)).date()
    rotation.handoff_weekday = rotation.start_date.weekday()
    rotation.shift_days = 7
    rotation.save()
    return oncall


def test_anonymous_is_refused(db):
    for path in ("/api/v2/incidents", "/api/v2/rotations", "/api/v2/oncall/now"):
        response = api().get(path)
        assert response.status_code in (401, 403)
        assert response.json()["code"] in ("UnauthorizedUserError", "ForbiddenUserError")


def test_user_reports_and_sees_only_own_reports(on_shift):
    created = api(on_shift.a_member).post("/api/v2/incidents", {
        "title": "Jobs stuck in waiting", "description": "since 9am", "severity": 2, "cluster": "local",
    }, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["source"] == IncidentSource.USER and body["severity_confirmed"] is False
    assert body["assignees"] == ["alice"] and body["reporter"] == "a_member"
    assert body["timeline"][0]["kind"] == "opened"
    services.open_incident(title="Node down", severity=1, source=IncidentSource.ALERT)
    mine = api(on_shift.a_member).get("/api/v2/incidents").json()
    assert [i["title"] for i in mine["results"]] == ["Jobs stuck in waiting"]
    assert api(on_shift.b_member).get("/api/v2/incidents").json()["results"] == []
    assert api(on_shift.b_member).get(f"/api/v2/incidents/{body['id']}").status_code == 404
    assert len(api(on_shift.bob).get("/api/v2/incidents").json()["results"]) == 2  # a DRI sees all
    assert len(api(on_shift.root).get("/api/v2/incidents").json()["results"]) == 2


def test_create_validates_and_names_fields(on_shift):
    response = api(on_shift.a_member).post("/api/v2/incidents", {"title": "", "severity": 7, "cluster": "nope"}, format="json")
    assert response.status_code == 400
    message = response.json()["message"]
    assert "title" in message and "severity" in message and "cluster" in message


def test_who_may_not_act_hears_so_before_anything_about_their_input(on_shift):
    incident_id = api(on_shift.a_member).post("/api/v2/incidents", {"title": "UI down", "severity": 1}, format="json").json()["id"]
    reporter = api(on_shift.a_member)
    for action, body in (("confirm-severity", {"severity": 9}), ("update", {}), ("resolve", {"note": 7}),
                         ("review", {})):
        response = reporter.post(f"/api/v2/incidents/{incident_id}/{action}", body, format="json")
        assert (action, response.status_code, response.json()["code"]) == (action, 403, "ForbiddenUserError")


def test_actions_through_the_api(on_shift):
    incident_id = api(on_shift.a_member).post("/api/v2/incidents", {"title": "UI down", "severity": 1}, format="json").json()["id"]
    base = f"/api/v2/incidents/{incident_id}"
    dri = api(on_shift.alice)
    # The reporter sees the incident but does not act on it.
    refused = api(on_shift.a_member).post(f"{base}/acknowledge")
    assert refused.status_code == 403 and refused.json()["code"] == "ForbiddenUserError"
    early = dri.post(f"{base}/update", {"message": "looking"}, format="json")
    assert early.status_code == 409 and early.json()["code"] == "IncidentStateError"
    assert dri.post(f"{base}/confirm-severity", {"severity": 0}, format="json").json()["severity"] == 0
    assert dri.post(f"{base}/acknowledge").json()["status"] == "acknowledged"
    assert dri.post(f"{base}/acknowledge").status_code == 409
    assert dri.post(f"{base}/update", {}, format="json").status_code == 400
    updated = dri.post(f"{base}/update", {"message": "restarting the web portal"}, format="json").json()
    assert updated["timeline"][-1]["message"] == "restarting the web portal"
    assert updated["sla_clock"]["kind"] == "update"
    assert dri.post(f"{base}/mitigate", {"message": "served from the standby"}, format="json").json()["status"] == "mitigated"
    assert dri.post(f"{base}/resolve", {}, format="json").json()["status"] == "resolved"
    no_review = dri.post(f"{base}/close")
    assert no_review.status_code == 400 and "cause" in no_review.json()["message"]
    reviewed = dri.post(f"{base}/review", {
        "cause": "certificate expired", "prevention": "alert 14 days before expiry",
        "follow_ups": [{"title": "Add cert expiry alert", "owner": "bob", "due_date": "2027-01-15", "link": "https://tracker.example/1"}],
    }, format="json").json()
    assert reviewed["follow_ups"][0]["owner"] == "bob"
    closed = dri.post(f"{base}/close").json()
    assert closed["status"] == "closed" and closed["closed_at"]


def test_list_filters(on_shift):
    services.open_incident(title="a", severity=1, source=IncidentSource.ALERT, cluster=on_shift.cluster)
    resolved = services.open_incident(title="b", severity=3, source=IncidentSource.DRI)
    services.acknowledge(resolved, on_shift.alice)
    services.resolve(resolved, on_shift.alice)
    client = api(on_shift.alice)
    titles = lambda query: sorted(i["title"] for i in client.get(f"/api/v2/incidents?{query}").json()["results"])  # noqa: E731
    assert titles("open=true") == ["a"]
    assert titles("status=resolved") == ["b"]
    assert titles("severity=3") == ["b"]
    assert titles("cluster=local") == ["a"]
    assert titles("source=alert") == ["a"]


def test_rotations_shifts_fair_share_and_on_call_now(on_shift):
    from apps.oncall.models import Rotation

    team_b = Rotation.objects.create(name="team-b", tenant=on_shift.tenant_b)
    RotationMember.objects.create(rotation=team_b, user=on_shift.b_admin)
    member = api(on_shift.a_member)
    names = [r["name"] for r in member.get("/api/v2/rotations").json()["results"]]
    assert names == ["platform"]  # another team's rotation is not visible
    assert member.get(f"/api/v2/rotations/{team_b.pk}").status_code == 404
    rotation = member.get(f"/api/v2/rotations/{on_shift.rotation.pk}").json()
    assert rotation["members"] == ["alice", "bob"]
    shifts = member.get(f"/api/v2/rotations/{on_shift.rotation.pk}/shifts?count=3").json()
    assert [s["scheduled"] for s in shifts] == [["alice"], ["bob"], ["alice"]]
    assert member.get(f"/api/v2/rotations/{on_shift.rotation.pk}/shifts?count=0").status_code == 400
    assert member.get(f"/api/v2/rotations/{on_shift.rotation.pk}/shifts?count=x").status_code == 400
    share = member.get(f"/api/v2/rotations/{on_shift.rotation.pk}/fair-share?days=2").json()
    assert {r["username"]: r["shifts"] for r in share} == {"alice": 1, "bob": 0}
    now = member.get("/api/v2/oncall/now").json()
    assert now == [{"rotation": "platform", "tenant": None, "dris": [{"username": "alice", "email": "alice@example.com"}]}]
    assert [r["rotation"] for r in api(on_shift.b_member).get("/api/v2/oncall/now").json()] == ["platform", "team-b"]
    next_week = (timezone.now() + timedelta(days=7)).isoformat()
    later = member.get("/api/v2/oncall/now", {"at": next_week}).json()
    assert later[0]["dris"][0]["username"] == "bob"
    bad = member.get("/api/v2/oncall/now?at=tomorrow")
    assert bad.status_code == 400 and bad.json()["message"].startswith("at:")


def test_current_dris_for_the_onboarding_mail(on_shift):
    assert services.current_dris() == [on_shift.alice]


def test_schema_lists_the_on_call_routes(world):
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    expected = [
        "/api/v2/incidents/", "/api/v2/incidents/{id}/", "/api/v2/incidents/{id}/acknowledge/",
        "/api/v2/incidents/{id}/update/", "/api/v2/incidents/{id}/mitigate/", "/api/v2/incidents/{id}/resolve/",
        "/api/v2/incidents/{id}/close/", "/api/v2/incidents/{id}/review/", "/api/v2/rotations/",
        "/api/v2/oncall/now", "/api/v2/alerts", "/api/v2/alerts/webhook",
    ]
    assert [p for p in expected if p not in paths] == []


def test_overrides_and_swaps_through_the_api(on_shift):
    rotation = on_shift.rotation
    base = f"/api/v2/rotations/{rotation.pk}"
    now = timezone.now()
    cover = {"user": "bob", "replaces": "alice", "starts_at": now.isoformat(),
             "ends_at": (now + timedelta(hours=4)).isoformat(), "reason": "dentist"}
    # A member outside the override may not arrange it; the members concerned and admins may.
    assert api(on_shift.a_member).post(f"{base}/overrides", cover, format="json").status_code == 403
    created = api(on_shift.bob).post(f"{base}/overrides", cover, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["user"] == "bob" and created.json()["replaces"] == "alice"
    assert services.current_dris() == [on_shift.bob]
    backwards = api(on_shift.root).post(f"{base}/overrides", {**cover, "ends_at": cover["starts_at"]}, format="json")
    assert backwards.status_code == 400 and "ends_at" in backwards.json()["message"]
    unknown = api(on_shift.root).post(f"{base}/overrides", {**cover, "replaces": "nobody"}, format="json")
    assert unknown.status_code == 400 and "replaces" in unknown.json()["message"]

    swap = {"first_index": 0, "first_user": "alice", "second_index": 1, "second_user": "bob"}
    done = api(on_shift.alice).post(f"{base}/swap", swap, format="json")
    assert done.status_code == 201 and len(done.json()) == 2
    shifts = api(on_shift.alice).get(f"{base}/shifts?count=2").json()
    assert [o["user"] for o in shifts[1]["overrides"]] == ["alice"]
    wrong = api(on_shift.root).post(f"{base}/swap", {**swap, "first_user": "bob"}, format="json")
    assert wrong.status_code == 400 and "shift" in wrong.json()["message"]
    assert api(on_shift.b_member).post(f"/api/v2/rotations/{rotation.pk}/swap", swap, format="json").status_code == 403


def test_incident_list_query_count_does_not_grow_with_the_page(on_shift, django_assert_max_num_queries):
    client = api(on_shift.alice)
    services.open_incident(title="first", severity=1, source=IncidentSource.ALERT, cluster=on_shift.cluster)
    with django_assert_max_num_queries(20) as one:
        client.get("/api/v2/incidents")
    for i in range(10):
        services.open_incident(title=f"more {i}", severity=i % 4, source=IncidentSource.ALERT, cluster=on_shift.cluster)
    with django_assert_max_num_queries(len(one.captured_queries)):
        assert len(client.get("/api/v2/incidents").json()["results"]) == 11
