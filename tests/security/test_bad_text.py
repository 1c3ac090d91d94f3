"""Text no database stores and files that are not CSV: a 4xx or a form naming the line, never a
500; an Alertmanager delivery keeps its good alerts when one of them is bad."""

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from apps.oncall.models import Alert

pytestmark = pytest.mark.django_db

TOKEN = "webhook-secret"


def _alert(fingerprint, **labels):
    return {
        "status": "firing", "labels": {"alertname": "NodeDown", **labels},
        "annotations": {"summary": "a node is down"}, "startsAt": "2026-01-06T10:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus.example/graph", "fingerprint": fingerprint,
    }


def _deliver(*alerts):
    body = {
        "version": "4", "groupKey": '{}:{alertname="NodeDown"}', "status": "firing", "receiver": "pai",
        "groupLabels": {"alertname": "NodeDown"}, "commonLabels": {}, "commonAnnotations": {}, "alerts": list(alerts),
    }
    return APIClient().post("/api/v2/alerts/webhook", body, format="json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.fixture
def intake(settings, world):
    settings.PAI_ALERTMANAGER_TOKEN = TOKEN


def test_a_nul_in_one_alerts_label_drops_that_alert_and_keeps_the_others(intake):
    response = _deliver(_alert("good", instance="gpu-node-1"), _alert("bad", instance="gpu-node-2\u0000"))

    assert response.status_code == 200, response.content
    assert response.json()["rejected"] == [
        "alerts[1].labels.'instance': The label or annotation contains a NUL character."
    ]
    assert list(Alert.objects.values_list("fingerprint", flat=True)) == ["good"]


def test_a_delivery_of_only_bad_alerts_is_a_400_naming_them(intake):
    response = _deliver(_alert("bad", instance="x\u0000"), {**_alert("worse"), "annotations": {"\u0000": "y"}})

    assert response.status_code == 400
    message = response.json()["message"]
    assert "alerts: alerts[0].labels.'instance': The label or annotation contains a NUL character." in message
    assert "alerts[1].annotations.'\\x00': The label or annotation contains a NUL character." in message
    assert not Alert.objects.exists()


def test_a_delivery_nested_twenty_thousand_deep_is_a_400_naming_the_bound(intake):
    # Issue 13, item 2: every JSON input is read within the nesting bound, Alertmanager's too.
    body = '{"version": "4", "alerts": [' + '{"a": ' * 20_000 + "1" + "}" * 20_000 + "]}"
    response = APIClient().post("/api/v2/alerts/webhook", body, content_type="application/json",
                                HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 400, response.content[:300]
    assert response.json()["message"] == "JSON parse error - the body is nested more than 64 levels deep"
    assert not Alert.objects.exists()


def _upload(world, content):
    client = Client()
    client.force_login(world.a_admin)
    return client.post(
        f"/admin/tenants/tenant/{world.tenant_a.pk}/bulk-onboard/",
        {"csv_file": SimpleUploadedFile("members.csv", content, content_type="text/csv")},
    )


@pytest.mark.parametrize("content, problem", [
    (b"username,email,groups\nnewbie,newbie@example.com,team_a\nnul\x00user,n@example.com,team_a\n",
     "line 3: contains a NUL character; is this a CSV file?"),
    (b"username,email,groups\nnewbie,newbie@example.com,team_a\nquoted,\"q@example.com,team_a\nlast,l@example.com,team_a\n",
     "line 3: cannot be read as CSV: a quoted value is never closed"),
    (b"username,email,groups\nnewbie,newbie@example.com,team_a\nhuge,h@example.com,team_a,member,"
     + b"x" * (128 * 1024 + 1) + b"\n",
     "line 3: cannot be read as CSV: a value is longer than 131072 characters"),
])
def test_a_file_that_is_not_csv_is_refused_line_by_line_and_onboards_nobody(world, content, problem):
    response = _upload(world, content)

    assert response.status_code == 200
    assert problem in response.content.decode()
    assert not get_user_model().objects.filter(username="newbie").exists()
