"""Paging (issue 15): a sev 0 at 03:00 on a Saturday reaches the DRIs at once, by e-mail and in
chat (Slack- and Teams-compatible incoming webhooks, received by a local HTTP server)."""

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from apps.oncall import services
from apps.oncall.choices import ChatFormat, IncidentSource
from apps.oncall.models import ChatWebhook, SlaPolicy

UTC = timezone.utc
SATURDAY_3AM = datetime(2026, 1, 10, 3, 0, tzinfo=UTC)


class Receiver:
    """A chat service's incoming-webhook endpoint: records each POST; answers 500 while `down`."""

    def __init__(self):
        self.posts, self.down = [], False
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.down:
                    self.send_response(500)
                else:
                    receiver.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
                    self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def hooks(db, receiver):
    slack = ChatWebhook(name="ops-slack", format=ChatFormat.SLACK)
    slack.url = f"{receiver.url}/services/T000/B000/XXXX"
    slack.save()
    teams = ChatWebhook(name="ops-teams", format=ChatFormat.TEAMS)
    teams.url = f"{receiver.url}/webhookb2/abc"
    teams.save()
    return slack, teams


def test_a_sev0_at_3am_on_saturday_pages_the_dri_within_one_sweep(oncall, hooks, receiver):
    incident = services.open_incident(
        title="Cluster <local> down & unreachable <!channel>", severity=0, source=IncidentSource.ALERT,
        cluster=oncall.cluster, now=SATURDAY_3AM,
    )
    # The clock is paused until Monday 09:00 (working hours); the page is not.
    assert incident.ack_deadline > SATURDAY_3AM + timedelta(hours=50)
    services.run_sla_sweep(SATURDAY_3AM + timedelta(seconds=30))

    on_call = services.rotation_dris(oncall.rotation, SATURDAY_3AM)
    [page] = mail.outbox
    assert page.to == [on_call[0].email] and page.subject.startswith("[pai] Sev 0 on local")
    paths = sorted(path for path, _, _ in receiver.posts)
    assert paths == ["/services/T000/B000/XXXX", "/webhookb2/abc"]
    slack = next(body for path, _, body in receiver.posts if path.startswith("/services"))
    teams = next(body for path, _, body in receiver.posts if path.startswith("/webhookb2"))
    assert all(ctype == "application/json" for _, ctype, _ in receiver.posts)
    # The incident's own text cannot mention @channel or forge a link in Slack.
    assert "&lt;!channel&gt;" in slack["text"] and "<!channel>" not in slack["text"]
    assert f"/oncall/incidents/{incident.pk}/|" in slack["text"]
    assert teams["@type"] == "MessageCard" and teams["title"].startswith("[pai] Sev 0")
    assert teams["potentialAction"][0]["targets"][0]["uri"].endswith(f"/oncall/incidents/{incident.pk}/")

    # Once per channel: the next sweeps page nobody again.
    services.run_sla_sweep(SATURDAY_3AM + timedelta(minutes=1))
    assert len(mail.outbox) == 1 and len(receiver.posts) == 2


def test_a_chat_service_that_is_down_is_paged_again_by_the_next_sweep(oncall, hooks, receiver):
    receiver.down = True
    services.open_incident(title="API fails", severity=1, source=IncidentSource.DRI, cluster=oncall.cluster,
                           now=SATURDAY_3AM)
    services.run_sla_sweep(SATURDAY_3AM)
    assert len(mail.outbox) == 1 and receiver.posts == []
    receiver.down = False
    services.run_sla_sweep(SATURDAY_3AM + timedelta(minutes=1))
    assert len(receiver.posts) == 2 and len(mail.outbox) == 1


def test_a_severity_raise_pages_again(oncall, hooks, receiver):
    incident = services.report_incident(oncall.a_member, title="Some jobs fail", severity=3, cluster=oncall.cluster)
    services.run_sla_sweep()
    assert len(receiver.posts) == 2
    services.confirm_severity(incident, oncall.root, 1)
    services.run_sla_sweep()
    assert len(receiver.posts) == 4
    assert "Sev 1" in receiver.posts[-1][2].get("text", "") + receiver.posts[-1][2].get("title", "")


def test_an_sla_row_may_run_around_the_clock(oncall):
    row = SlaPolicy.matching(0, "production")
    row.around_the_clock = True
    row.save()
    incident = services.open_incident(title="Down", severity=0, source=IncidentSource.ALERT, cluster=oncall.cluster,
                                      now=SATURDAY_3AM)
    assert incident.ack_deadline == SATURDAY_3AM + row.ack_within
    assert incident.sla["calendar"]["name"] == "24 × 7"


def test_the_webhook_url_is_stored_encrypted_and_never_shown(client, oncall, hooks):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM oncall_chatwebhook")
        stored = " ".join(row[0] for row in cursor.fetchall())
    assert "XXXX" not in stored and "webhookb2" not in stored
    client.force_login(oncall.root)
    page = client.get(f"/admin/oncall/chatwebhook/{hooks[0].pk}/change/")
    assert page.status_code == 200 and b"XXXX" not in page.content


def test_opening_an_incident_queues_its_page_at_once(oncall, hooks, receiver, tasks_inline,
                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.open_incident(title="Down", severity=0, source=IncidentSource.ALERT, cluster=oncall.cluster)
    assert len(mail.outbox) == 1 and len(receiver.posts) == 2  # no sweep needed


def test_an_incidents_text_is_sent_as_written_never_run_as_a_template(oncall, hooks, receiver, settings):
    # Issue 13, item 1: whoever reports an incident writes its title; it is data in every page.
    title = "{{ settings.SECRET_KEY }} {% debug %} {% for u in users %}{{ u.password }}{% endfor %}"
    services.open_incident(title=title, severity=1, source=IncidentSource.DRI, cluster=oncall.cluster,
                           now=SATURDAY_3AM)
    services.run_sla_sweep(SATURDAY_3AM)
    [page] = mail.outbox
    assert page.subject.endswith(f": {title}")
    slack, teams = (next(body for path, _, body in receiver.posts if path.startswith(prefix))
                    for prefix in ("/services", "/webhookb2"))
    assert title in slack["text"] and teams["title"].endswith(title)
    for text in (page.subject, page.body, json.dumps(receiver.posts)):
        assert settings.SECRET_KEY not in text and "pbkdf2" not in text and "md5$" not in text
