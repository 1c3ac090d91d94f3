"""/metrics without Prometheus: who may read it, and the worker's Kubernetes API counters."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.jobs.worker.loop import run_scheduler
from apps.monitoring import figures
from apps.monitoring.models import WorkerFigures
from tests.kubernetes.conftest import kube_cluster  # noqa: F401 (a fixture)
from tests.kubeserver.fixtures import kube_server  # noqa: F401 (a fixture)
from tests.worker.conftest import job_yaml, submit, worker  # noqa: F401 (submit, worker are fixtures)


def samples(client, token="t0ken"):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


@pytest.mark.django_db
def test_metrics_need_the_token_when_one_is_set(client, settings):
    settings.PAI_METRICS_TOKEN = "t0ken"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer other").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic t0ken").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t0ken")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.django_db
def test_metrics_are_closed_in_production_until_a_token_is_set(client, settings):
    settings.PRODUCTION, settings.PAI_METRICS_TOKEN = True, ""
    response = client.get("/metrics")
    assert response.status_code == 403
    assert b"PAI_METRICS_TOKEN" in response.content


@pytest.mark.django_db
def test_metrics_are_open_on_a_development_box(client, settings):
    settings.PRODUCTION, settings.PAI_METRICS_TOKEN = False, ""
    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_worker_counts_kubernetes_api_requests_by_resource_verb_and_outcome(
    world, kube_cluster, kube_server, submit, client, settings  # noqa: F811
):
    settings.PAI_METRICS_TOKEN = "t0ken"
    submit(world.a_member, job_yaml("counted", roles={"main": {"gpu": 1, "commands": ["true"]}}))
    # The API server is briefly unavailable: the first pod creation gets a 503 and is retried.
    kube_server.inject_fault("POST", r"/pods$", status=503, count=1, retry_after=0)
    run_scheduler(once=True)

    found = samples(client)

    def requests(**labels):
        return sum(
            value for (name, sample_labels), value in found.items()
            if name == "pai_pod_api_requests_total" and set(labels.items()) <= sample_labels
        )

    assert requests(cluster="local", resource="pods", verb="create", outcome="503") == 1
    assert requests(cluster="local", resource="pods", verb="create", outcome="ok") == 1
    assert requests(cluster="local", resource="pods", verb="list", outcome="ok") >= 1
    assert requests(cluster="local", resource="nodes") >= 1
    assert WorkerFigures.objects.get().data["counters"]["pai_pod_api_requests_total"]


@pytest.mark.django_db
def test_worker_counts_preemptions_and_their_victims_by_mode(world, worker, submit, client, settings):  # noqa: F811
    settings.PAI_METRICS_TOKEN = "t0ken"
    sleep = ["sleep 600"]
    # team_a's whole quota (two nodes) goes to a gang that accepts lazy preemption.
    lazy = submit(world.a_member, job_yaml("lazy", lazy=True, roles={"main": {"instances": 2, "gpu": 8, "commands": sleep}}))
    worker.wait_for_state(lazy, "RUNNING")
    # A prod job of team_a demotes it to opportunistic: it runs on, one victim, lazily.
    urgent = submit(world.a_member, job_yaml("urgent", priority="prod", roles={"main": {"gpu": 8, "commands": sleep}}))
    worker.wait_for_state(urgent, "RUNNING")
    # An opportunistic job of team_b takes the last free node; a guaranteed job of team_b
    # then kills one opportunistic gang to run.
    filler = submit(world.b_member, job_yaml("filler", vc="team_b", priority="oppo",
                                             roles={"main": {"gpu": 8, "commands": sleep}}))
    worker.wait_for_state(filler, "RUNNING")
    guaranteed = submit(world.b_member, job_yaml("mine", vc="team_b", roles={"main": {"gpu": 8, "commands": sleep}}))
    worker.wait_for_state(guaranteed, "RUNNING")
    figures.recorder.publish(force=True)

    found = samples(client)
    assert found[("pai_scheduler_preemptions_total", frozenset({("cluster", "local")}))] == 2
    victims = {
        dict(labels)["mode"]: value for (name, labels), value in found.items()
        if name == "pai_scheduler_preemption_victims_total"
    }
    assert victims == {"lazy": 1, "kill": 1}
    placements = {
        dict(labels)["vc"]: value for (name, labels), value in found.items()
        if name == "pai_scheduler_placements_total"
    }
    assert placements == {"team_a": 2, "team_b": 2}
