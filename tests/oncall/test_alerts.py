"""Alertmanager webhook intake: auth, grouping, routing rules, resolution, OpenPAI's GET /api/v2/alerts."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.oncall import services
from apps.oncall.choices import IncidentSource, IncidentStatus, TimelineKind
from apps.oncall.models import Alert, AlertRoute, Incident
from tests.conftest import requires_postgres

TOKEN = "s3cret-webhook-token"


@pytest.fixture
def token(settings):
    settings.PAI_ALERTMANAGER_TOKEN = TOKEN
    return TOKEN


def alert(name="NodeDown", status="firing", fingerprint="f1", **labels):
    return {
        "status": status,
        "labels": {"alertname": name, **labels},
        "annotations": {"summary": f"{name} on {labels.get('instance', 'somewhere')}"},
        "startsAt": "2026-01-06T10:00:00Z",
        "endsAt": "2026-01-06T11:00:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": fingerprint,
    }


def payload(*alerts, group_key='{}:{alertname="NodeDown"}', status=None):
    alerts = list(alerts)
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": status or ("firing" if any(a["status"] == "firing" for a in alerts) else "resolved"),
        "receiver": "pai",
        "groupLabels": {"alertname": alerts[0]["labels"]["alertname"]},
        "commonLabels": alerts[0]["labels"],
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
        "alerts": alerts,
    }


def post(body, token=TOKEN):
    client = APIClient()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post("/api/v2/alerts/webhook", body, format="json", **headers)


def test_webhook_needs_the_bearer_secret(oncall, settings):
    settings.PAI_ALERTMANAGER_TOKEN = ""
    disabled = post(payload(alert()))
    assert disabled.status_code == 403 and "PAI_ALERTMANAGER_TOKEN" in disabled.json()["message"]
    settings.PAI_ALERTMANAGER_TOKEN = TOKEN
    assert post(payload(alert()), token=None).status_code == 401
    wrong = post(payload(alert()), token="guess")
    assert wrong.status_code == 401 and wrong.json()["code"] == "UnauthorizedUserError"
    assert not Incident.objects.exists()


def test_firing_alert_opens_an_incident_assigned_to_the_dri(oncall, token):
    response = post(payload(alert(instance="gpu-node-1", cluster="local", severity="critical")))
    assert response.status_code == 200
    incident = Incident.objects.get(pk=response.json()["incident"])
    assert incident.source == IncidentSource.ALERT and incident.status == IncidentStatus.TRIGGERED
    assert incident.title == "NodeDown on gpu-node-1"
    assert incident.severity == 1 and incident.cluster == oncall.cluster  # from the labels
    assert incident.reporter is None
    assert incident.alerts.get().labels["instance"] == "gpu-node-1"
    assert incident.timeline.filter(kind=TimelineKind.ALERT_FIRING).count() == 1


def test_same_group_joins_one_open_incident_and_repeats_are_silent(oncall, token):
    first = post(payload(alert(fingerprint="f1", instance="gpu-node-1")))
    again = post(payload(alert(fingerprint="f1", instance="gpu-node-1"), alert(fingerprint="f2", instance="gpu-node-2")))
    assert first.json()["incident"] == again.json()["incident"]
    incident = Incident.objects.get()
    assert sorted(incident.alerts.values_list("fingerprint", flat=True)) == ["f1", "f2"]
    assert incident.timeline.filter(kind=TimelineKind.ALERT_FIRING).count() == 2
    other = post(payload(alert("DiskFull", fingerprint="f3"), group_key='{}:{alertname="DiskFull"}'))
    assert other.json()["incident"] != first.json()["incident"]


def test_resolved_alerts_annotate_and_a_closed_group_opens_anew(oncall, token):
    opened = post(payload(alert(fingerprint="f1"), alert(fingerprint="f2"))).json()["incident"]
    post(payload(alert(fingerprint="f1", status="resolved"), alert(fingerprint="f2")))
    incident = Incident.objects.get(pk=opened)
    assert incident.timeline.filter(kind=TimelineKind.ALERT_RESOLVED).count() == 1
    assert incident.status == IncidentStatus.TRIGGERED  # no route asked for auto-mitigation
    assert incident.alerts.get(fingerprint="f1").ends_at is not None
    services.acknowledge(incident, oncall.alice)
    services.resolve(incident, oncall.alice)
    # The group fires again after its incident was resolved: a new incident.
    reopened = post(payload(alert(fingerprint="f1"))).json()["incident"]
    assert reopened != opened


def test_resolved_only_delivery_for_an_unknown_group_is_ignored(oncall, token):
    response = post(payload(alert(status="resolved")))
    assert response.status_code == 200 and response.json() == {"incident": None, "status": None, "rejected": []}
    assert not Incident.objects.exists()


def test_routing_rules_set_severity_cluster_and_auto_mitigation(oncall, token):
    AlertRoute.objects.create(name="catch-all", position=20, matchers='alertname=~".+"', severity=3)
    AlertRoute.objects.create(name="nodes", position=10, matchers='alertname="NodeDown"\nteam!="research"',
                              severity=0, cluster=oncall.cluster, auto_mitigate=True)
    node = Incident.objects.get(pk=post(payload(alert(fingerprint="n1"))).json()["incident"])
    assert node.severity == 0 and node.cluster == oncall.cluster and node.sla["name"] == "Severity 0–1, production"
    research = post(payload(alert(fingerprint="n2", team="research"), group_key="g-research")).json()["incident"]
    assert Incident.objects.get(pk=research).severity == 3
    resolved = post(payload(alert(fingerprint="n1", status="resolved")))
    assert resolved.json()["status"] == IncidentStatus.MITIGATED
    node.refresh_from_db()
    assert node.mitigated_at is not None
    assert node.timeline.filter(kind=TimelineKind.TRANSITION, to_status="mitigated", actor__isnull=True).exists()


def test_bad_payloads_name_the_field(oncall, token):
    for body, field in [
        ({"alerts": []}, "alerts"),
        ({**payload(alert()), "alerts": [{**alert(), "status": "exploded"}]}, "alerts[0].status"),
        ({**payload(alert()), "alerts": [{**alert(), "labels": "x"}]}, "alerts[0].labels"),
        ({**payload(alert()), "alerts": [{**alert(), "startsAt": "yesterday"}]}, "alerts[0].startsAt"),
    ]:
        response = post(body)
        assert response.status_code == 400, body
        assert field in response.json()["message"]
    assert post([1, 2]).status_code == 400
    assert not Incident.objects.exists()
    # A bad alert beside a good one is left out and named; the good one is kept (issue 13).
    response = post({**payload(alert()), "alerts": [alert(), {**alert(), "labels": "x"}]})
    assert response.status_code == 200
    assert response.json()["rejected"] == ["alerts[1].labels: Expected a non-empty object of labels."]


def test_route_matchers_are_validated(db):
    from django.core.exceptions import ValidationError

    route = AlertRoute(name="bad", matchers="alertname~NodeDown", severity=1)
    with pytest.raises(ValidationError):
        route.full_clean()
    route.matchers = 'job=~"("'
    with pytest.raises(ValidationError):
        route.full_clean()


def test_get_alerts_shows_users_only_their_own_jobs(oncall, token):
    post(payload(alert("JobGpuIdle", fingerprint="a1", username="a_member", job_name="a_member~train"), group_key="g1"))
    post(payload(alert("JobOom", fingerprint="a2", job_name="a_member~eval"), group_key="g2"))
    post(payload(alert("JobGpuIdle", fingerprint="b1", username="b_member", job_name="b_member~train"), group_key="g3"))
    post(payload(alert("NodeDown", fingerprint="n1"), group_key="g4"))
    post(payload(alert("NodeDown", fingerprint="n1", status="resolved"), group_key="g4"))

    def fingerprints(user):
        client = APIClient()
        client.force_authenticate(user)
        response = client.get("/api/v2/alerts")
        assert response.status_code == 200
        return sorted(a["fingerprint"] for a in response.json())

    assert fingerprints(oncall.a_member) == ["a1", "a2"]
    assert fingerprints(oncall.b_member) == ["b1"]
    assert fingerprints(oncall.root) == ["a1", "a2", "b1"]  # firing only
    assert fingerprints(oncall.alice) == ["a1", "a2", "b1"]
    one = APIClient()
    one.force_authenticate(oncall.b_member)
    body = one.get("/api/v2/alerts").json()[0]
    assert body["labels"]["job_name"] == "b_member~train" and body["status"]["state"] == "active"
    assert APIClient().get("/api/v2/alerts").status_code in (401, 403)


@requires_postgres
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_concurrent_deliveries_of_one_group_make_one_incident(oncall):
    body = payload(alert(fingerprint="c1"), alert(fingerprint="c2"), group_key="concurrent")
    barrier = threading.Barrier(6)
    errors, incidents = [], []

    def deliver():
        try:
            barrier.wait()
            incidents.append(services.ingest_alertmanager(body).pk)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(incidents)) == 1
    assert Incident.objects.count() == 1
    assert Alert.objects.count() == 2
    assert Incident.objects.get().timeline.filter(kind=TimelineKind.ALERT_FIRING).count() == 2
