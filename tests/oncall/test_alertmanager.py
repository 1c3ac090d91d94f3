"""A real Alertmanager (Debian's prometheus-alertmanager) delivers its webhook to pai.

Alerts are pushed into Alertmanager through its API v2; Alertmanager groups them and
calls pai's webhook on the live server; pai opens, groups and annotates incidents.
"""

import json
import os
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from apps.oncall.choices import IncidentSource, IncidentStatus, TimelineKind
from apps.oncall.models import AlertRoute, Incident

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
TOKEN = "alertmanager-integration-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, response.read()


def wait_for(predicate, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def alertmanager(live_server, tmp_path, settings):
    assert os.access(ALERTMANAGER, os.X_OK), f"{ALERTMANAGER} is missing: run `make system-deps`"
    settings.PAI_ALERTMANAGER_TOKEN = TOKEN
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "route": {
            "receiver": "pai", "group_by": ["alertname"],
            "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h",
        },
        "receivers": [{
            "name": "pai",
            "webhook_configs": [{
                "url": f"{live_server.url}/api/v2/alerts/webhook",
                "send_resolved": True,
                "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}},
            }],
        }],
    }))
    log = open(tmp_path / "alertmanager.log", "wb")
    process = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=debug"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready():
        assert process.poll() is None, (tmp_path / "alertmanager.log").read_text()
        try:
            return http("GET", f"{url}/-/ready")[0] == 200
        except OSError:
            return False

    try:
        wait_for(ready, what="Alertmanager to start")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def push(url, *alerts):
    status, _ = http("POST", f"{url}/api/v2/alerts", list(alerts))
    assert status == 200


def am_alert(name, instance, *, resolved=False, **labels):
    now = datetime.now(timezone.utc)
    body = {
        "labels": {"alertname": name, "instance": instance, **labels},
        "annotations": {"summary": f"{name} on {instance}"},
        "generatorURL": "http://prometheus.example/graph",
        "startsAt": (now - timedelta(minutes=5)).isoformat(),
    }
    if resolved:
        body["endsAt"] = (now - timedelta(seconds=30)).isoformat()
    return body


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_alertmanager_groups_alerts_into_incidents_and_resolves_them(oncall, alertmanager):
    AlertRoute.objects.create(name="nodes", matchers='alertname="NodeDown"', severity=0,
                              cluster=oncall.cluster, auto_mitigate=True)
    push(alertmanager, am_alert("NodeDown", "gpu-node-1"), am_alert("NodeDown", "gpu-node-2"),
         am_alert("DiskFull", "cpu-node-1", severity="warning"))

    def node_incident():
        return Incident.objects.filter(title__startswith="NodeDown").first()

    wait_for(lambda: Incident.objects.count() == 2 and node_incident().alerts.count() == 2,
             what="two incidents, the NodeDown one with both alerts")
    node = node_incident()
    disk = Incident.objects.get(title="DiskFull on cpu-node-1")
    assert node.source == disk.source == IncidentSource.ALERT
    assert (node.severity, node.cluster, node.sla["name"]) == (0, oncall.cluster, "Severity 0–1, production")
    assert disk.severity == 2
    assert node.status == IncidentStatus.TRIGGERED

    # A repeated push of a firing alert joins the open incident, it opens nothing new.
    push(alertmanager, am_alert("NodeDown", "gpu-node-2"))
    push(alertmanager, am_alert("NodeDown", "gpu-node-1", resolved=True))
    wait_for(lambda: node.timeline.filter(kind=TimelineKind.ALERT_RESOLVED).exists(),
             what="the resolved alert on the timeline")
    node.refresh_from_db()
    assert node.status == IncidentStatus.TRIGGERED  # one of two alerts still fires
    assert Incident.objects.count() == 2

    push(alertmanager, am_alert("NodeDown", "gpu-node-2", resolved=True))
    wait_for(lambda: Incident.objects.get(pk=node.pk).status == IncidentStatus.MITIGATED,
             what="auto-mitigation once every alert resolved")
    resolved = node.timeline.filter(kind=TimelineKind.ALERT_RESOLVED)
    assert sorted(e.data["labels"]["instance"] for e in resolved) == ["gpu-node-1", "gpu-node-2"]
    assert node.timeline.filter(kind=TimelineKind.ALERT_FIRING).count() == 2
    disk.refresh_from_db()
    assert disk.status == IncidentStatus.TRIGGERED
