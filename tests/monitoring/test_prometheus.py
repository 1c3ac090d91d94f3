"""A real Prometheus scrapes a live pai and answers queries about pai's series.

The jobs are submitted over HTTP to the live server (so its request metrics count them),
the scheduler loop runs in this process as the worker would, and Prometheus scrapes the
server with the bearer token of `PAI_METRICS_TOKEN`.
"""

import urllib.error
import urllib.request

import pytest

from apps.accounts.services import issue_application_token
from apps.jobs.worker import lease
from apps.jobs.worker.loop import run_scheduler
from tests.worker.conftest import job_yaml

from .prometheus import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

def http(method, url, body=None, token=None, content_type="text/yaml"):
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body.encode() if body else None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_prometheus_scrapes_pai_and_queries_jobs_queue_worker_and_request_series(
    world, pai_server, prometheus, metrics_token, settings, tmp_path
):
    settings.PAI_DATA_DIR = tmp_path
    assert http("GET", f"{pai_server}/metrics")[0] == 401
    assert http("GET", f"{pai_server}/metrics", token="wrong")[0] == 401

    _, token = issue_application_token(world.a_member)
    prometheus.scrape("pai", pai_server, token=metrics_token)
    # The live server thread shares this process's request counters with earlier tests.
    submissions = 'django_http_requests_latency_seconds_by_view_method_count{view="job-list",method="POST"}'
    before = prometheus.value(submissions) or 0.0
    # Two whole nodes of team_a's two fit; the third 8-GPU job waits for one.
    for name in ("first", "second", "third"):
        text = job_yaml(name, roles={"main": {"gpu": 8, "commands": ["true"]}})
        status, body = http("POST", f"{pai_server}/api/v2/jobs", text, token=token)
        assert status == 202, body
    run_scheduler(once=True, holder="worker-a")
    lease.acquire("worker-b")

    # The lease changed hands last: a scrape that shows it saw everything before it.
    wait_for(lambda: prometheus.query('pai_worker_lease_holder{holder="worker-b"}'), what="a scrape after the cycle")
    assert prometheus.query('pai_jobs{vc="team_a",state="WAITING"}') == {
        frozenset({("__name__", "pai_jobs"), ("vc", "team_a"), ("state", "WAITING")}): 3.0
    }
    assert prometheus.value('pai_jobs{vc="team_b",state="RUNNING"}') == 0.0
    assert prometheus.value('pai_queue_length{vc="team_a"}') == 1.0
    assert prometheus.value('pai_queue_length{vc="team_b"}') == 0.0
    assert 0 < prometheus.value('pai_queue_oldest_wait_seconds{vc="team_a"}') < 120
    assert prometheus.value('pai_scheduler_placements_total{cluster="local",vc="team_a"}') == 2.0
    assert prometheus.value('pai_scheduler_cycles_total{cluster="local",outcome="ok"}') == 1.0
    assert prometheus.value('pai_scheduler_cycle_duration_seconds_count{cluster="local"}') == 1.0
    assert prometheus.value('pai_scheduler_cycle_duration_seconds_bucket{cluster="local",le="+Inf"}') == 1.0
    assert 0 <= prometheus.value('pai_reconciler_lag_seconds{cluster="local"}') < 120
    assert prometheus.value("pai_worker_lease_holder") == 1.0
    # Request latency by route: every submission counted once, whichever gunicorn worker served it.
    assert prometheus.value(submissions) == before + 3
