"""A cluster's Kubernetes client rate: set in the admin (or the API), used by the worker's client."""

from django.urls import reverse

from apps.clusters.models import DEFAULT_API_BURST, DEFAULT_API_QPS, Cluster
from apps.jobs.worker.backends import backend_for


def cluster_form(cluster, **changes):
    data = {
        "name": cluster.name, "cluster_class": cluster.cluster_class, "backend": cluster.backend,
        "connection": cluster.connection, "description": cluster.description,
        "api_qps": str(cluster.api_qps), "api_burst": str(cluster.api_burst),
        "prometheus_url": cluster.prometheus_url, "gpu_utilization_query": cluster.gpu_utilization_query,
        "cell_types-TOTAL_FORMS": "0", "cell_types-INITIAL_FORMS": "0",
        "cell_types-MIN_NUM_FORMS": "0", "cell_types-MAX_NUM_FORMS": "1000",
    }
    data.update(changes)
    return data


def test_admin_sets_the_rate_and_refuses_a_bad_one(world, client):
    client.force_login(world.root)
    url = reverse("admin:clusters_cluster_change", args=[world.cluster.pk])
    page = client.get(url)
    assert page.status_code == 200 and b'name="api_qps"' in page.content and b'name="api_burst"' in page.content
    response = client.post(url, cluster_form(world.cluster, api_qps="0", api_burst="5"))
    assert response.status_code == 200 and "api_qps" in response.context["adminform"].form.errors
    assert Cluster.objects.get(pk=world.cluster.pk).api_qps == world.cluster.api_qps == DEFAULT_API_QPS
    response = client.post(url, cluster_form(world.cluster, api_qps="40", api_burst="80"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    cluster = Cluster.objects.get(pk=world.cluster.pk)
    assert (cluster.api_qps, cluster.api_burst) == (40.0, 80)


def test_the_worker_client_takes_the_cluster_rate(world, kube_cluster):
    kube_cluster.api_qps, kube_cluster.api_burst = 7.5, 3
    kube_cluster.save()
    backend = backend_for(Cluster.objects.get(pk=kube_cluster.pk))
    try:
        bucket = backend.api.bucket
        assert (bucket.qps, bucket.burst) == (7.5, 3)
        # The burst goes at once; the next request waits for the rate.
        assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
        assert 0.05 < bucket.take() <= 1 / 7.5 + 0.01
    finally:
        backend.close()


def test_a_new_cluster_gets_a_rate_for_a_thousand_nodes(db):
    # 10,000 pods cost ~30,000 requests (create, log, delete): at the default rate they take
    # 150 s, inside the 5 minutes such a start-and-end should take.
    cluster = Cluster.objects.create(name="fresh", backend="kubernetes", connection="in-cluster")
    assert (cluster.api_qps, cluster.api_burst) == (DEFAULT_API_QPS, DEFAULT_API_BURST) == (200.0, 400)
