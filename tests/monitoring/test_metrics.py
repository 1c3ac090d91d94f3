"""/metrics without Prometheus: who may read it, and the worker's Kubernetes API counters."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.jobs.worker.loop import run_scheduler
from apps.monitoring.models import WorkerFigures
from tests.kubernetes.conftest import kube_cluster  # noqa: F401 (a fixture)
from tests.kubeserver.fixtures import kube_server  # noqa: F401 (a fixture)
from tests.worker.conftest import job_yaml, submit  # noqa: F401 (submit is a fixture)


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
