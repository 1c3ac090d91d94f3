"""The outside attack of issue 13, replayed against a live server process (gunicorn, one sync
worker, as the Helm chart runs it): YAML, JSON and CSV bombs and oversize bodies. Each gets a
4xx (or, for Alertmanager, its good alerts kept), the worker is never killed or restarted, and
its peak resident memory (VmHWM) stays under 300 MB."""

import json

import pytest
import yaml

from . import live

# The server's database is a copy of the test database: this only makes sure there is one.
pytestmark = pytest.mark.django_db

MEMORY_LIMIT_MB = 300
MB = 1024 * 1024


def _job(**changes):
    document = {
        "protocolVersion": 2, "name": "attack", "type": "job",
        "prerequisites": [{"type": "dockerimage", "name": "image", "uri": "ubuntu:22.04"}],
        "taskRoles": {"main": {"instances": 1, "dockerImage": "image",
                               "resourcePerInstance": {"cpu": 1, "memoryMB": 1024, "gpu": 0},
                               "commands": ["true"]}},
    }
    document["taskRoles"]["main"].update(changes)
    return yaml.safe_dump(document, sort_keys=False)


def _alias_bomb(levels=9, width=9):
    """The issue's body: nine aliases nested nine deep, 9**9 strings once expanded, in ~600 bytes."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n" + _job()


def _csv(rows):
    return ("username,email,groups\n" + rows).encode()


@pytest.fixture(scope="module")
def attack(live_pai):
    server = live_pai.server
    workers = server.worker_pids()
    auth = {"Authorization": f"Bearer {live_pai.token}"}

    def send(method, path, body=None, content_type="application/json", headers=None):
        return server.request(method, path, body, {"Content-Type": content_type, **auth, **(headers or {})})

    def run(request):
        status, body = request(send, live_pai)
        # The worker that took the request is the one still serving, alive and answering.
        assert server.worker_pids() == workers, server.log.read_text(errors="replace")[-3000:]
        assert send("GET", "/api/v2/users/me")[0] == 200
        return status, body, server.peak_memory_mb()

    return run


ATTACKS = {
    "YAML alias bomb (9 aliases, 9 deep)": (
        lambda send, pai: send("POST", "/api/v2/jobs", _alias_bomb(), "text/yaml"), 400,
        "body: is larger than 1048576 characters once its aliases are expanded"),
    "recursive YAML alias": (
        lambda send, pai: send("POST", "/api/v2/jobs", "loop: &loop {again: *loop}\n" + _job(), "text/yaml"), 400,
        "(a recursive alias)"),
    "YAML nested 10,000 deep": (
        lambda send, pai: send("POST", "/api/v2/jobs", "deep: " + "[" * 10_000 + "]" * 10_000 + "\n" + _job(),
                               "text/yaml"), 400, "body: is not valid YAML"),
    "50 MB job YAML": (
        lambda send, pai: live.post_streamed(pai.server.port, "/api/v2/jobs", {
            "Authorization": f"Bearer {pai.token}", "Content-Type": "text/yaml"}, 50 * MB),
        413, "the limit is 262144 bytes"),
    "50 MB JSON body, unauthenticated login": (
        lambda send, pai: live.post_streamed(pai.server.port, "/api/v2/authn/basic/login", {
            "Content-Type": "application/json"}, 50 * MB),
        413, "PayloadTooLargeError"),
    "JSON nested 100,000 deep, unauthenticated login": (
        lambda send, pai: send("POST", "/api/v2/authn/basic/login", '{"a": ' * 100_000 + "1" + "}" * 100_000,
                               headers={"Authorization": ""}),
        400, "nested more than 64 levels deep"),
    "JSON job nested 20,000 deep": (
        lambda send, pai: send("POST", "/api/v2/jobs", '{"a": ' * 20_000 + "1" + "}" * 20_000), 400,
        "nested more than 64 levels deep"),
    "job with 100,000 instances": (
        lambda send, pai: send("POST", "/api/v2/jobs", _job(instances=100_000), "text/yaml"), 400,
        "at most 10000 are allowed per job"),
    "job with 2,147,483,647 ports": (
        lambda send, pai: send("POST", "/api/v2/jobs", _job(resourcePerInstance={
            "cpu": 1, "memoryMB": 1024, "gpu": 0, "ports": {"p": 2147483647}}), "text/yaml"), 400,
        "at most 100 are allowed per task"),
    "Alertmanager label with \\u0000": (
        lambda send, pai: send("POST", "/api/v2/alerts/webhook", json.dumps({
            "version": "4", "groupKey": "g", "status": "firing", "receiver": "pai", "groupLabels": {},
            "alerts": [{"status": "firing", "labels": {"alertname": "Good"}, "startsAt": "2026-01-06T10:00:00Z"},
                       {"status": "firing", "labels": {"alertname": "Bad\u0000"}}]}),
            headers={"Authorization": f"Bearer {live.WEBHOOK_TOKEN}"}),
        200, "contains a NUL character"),
}
CSV_ATTACKS = {
    "CSV with NUL bytes": (_csv("mallory,m@example.com,live\n\x00\x01\x02\n"), "line 3: contains a NUL character"),
    "CSV with an unclosed quote": (_csv('mallory,"m@example.com,live\n' + "x,y,z\n" * 1000),
                                   "a quoted value is never closed"),
    "CSV with a 1 MB field": (_csv("mallory,m@example.com,live,member," + "x" * MB + "\n"),
                              "a value is longer than 131072 characters"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_api_bomb_gets_a_4xx_and_the_server_stays_small(attack, name):
    request, expected_status, expected_text = ATTACKS[name]
    status, body, peak = attack(request)
    assert status == expected_status, body
    assert expected_text in (body if isinstance(body, str) else json.dumps(body)), body
    print(f"{name}: {status}, the worker's peak resident memory {peak:.0f} MB")
    assert peak < MEMORY_LIMIT_MB, f"{name}: peak {peak:.0f} MB"


@pytest.mark.parametrize("name", list(CSV_ATTACKS))
def test_a_csv_bomb_uploaded_in_the_admin_is_refused_by_line_and_the_server_stays_small(attack, live_pai, name):
    content, problem = CSV_ATTACKS[name]
    admin = live.AdminSession(live_pai.server, live.ADMIN, live.PASSWORD)

    status, page, peak = attack(lambda send, pai: admin.upload(
        f"/admin/tenants/tenant/{pai.tenant}/bulk-onboard/", "csv_file", "members.csv", content))

    assert status == 200
    assert problem in page
    assert "Nobody was onboarded" in page
    print(f"{name}: {status}, the worker's peak resident memory {peak:.0f} MB")
    assert peak < MEMORY_LIMIT_MB, f"{name}: peak {peak:.0f} MB"
