import time

import pytest

from apps.clusters.models import Node

from scheduler.backends.kubernetes import Backoff, Circuit, KubeApi, KubernetesBackend
from tests.kubeserver.fixtures import kube_server  # noqa: F401  (the fixture, for this folder)

# Retries and pauses in milliseconds, so that faults cost tests little time.
FAST_BACKOFF = Backoff(base=0.01, cap=0.05, budget=0.3)


@pytest.fixture(autouse=True)
def _fast_kubernetes_retries(settings):
    settings.PAI_KUBE_RETRY_SECONDS = 0.3
    settings.PAI_KUBE_CIRCUIT_SECONDS = 0.2


def make_api(server, **options):
    options.setdefault("backoff", FAST_BACKOFF)
    options.setdefault("circuit", Circuit(cooldown=0.1, max_cooldown=0.2))
    return KubeApi(server.api_client(retries=False), qps=1000, burst=1000, **options)


def make_backend(server, **options):
    return KubernetesBackend(make_api(server, backoff=options.pop("backoff", FAST_BACKOFF)), **options)


@pytest.fixture
def backend(kube_server):
    kube_server.add_node("gpu-node-1", gpus=4, labels={"pai.sku": "A100", "pai.rack": "rack-1"})
    kube_server.add_node("cpu-node-1", gpus=0, cpu="16", memory="64Gi")
    b = make_backend(kube_server)
    yield b
    b.close()


def eventually(condition, timeout=5.0, tick=0.01):
    """Wait until `condition()` is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(tick)


class Kubelet:
    """Plays the kubelet and the node controller on the test server between worker cycles."""

    def __init__(self, server):
        self.server = server

    def pods(self, **labels):
        return [
            pod for pod in self.server.list_objects("pods")
            if all(pod["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
        ]

    def pod(self, job, role, index=0, attempt=None):
        """The live pod of a task (the latest attempt unless given)."""
        from apps.jobs.worker.launch import job_key

        pods = [
            p for p in self.pods(**{"pai.job": job_key(job), "pai.taskrole": role, "pai.task-index": str(index)})
            if attempt is None or p["metadata"]["labels"]["pai.attempt"] == str(attempt)
        ]
        assert pods, f"no pod for {role}[{index}]"
        return max(pods, key=lambda p: int(p["metadata"]["labels"]["pai.attempt"]))

    def start_pending(self):
        """Start every bound pod that waits (not being deleted)."""
        for pod in self.pods():
            meta = pod["metadata"]
            if pod.get("status", {}).get("phase") == "Pending" and not meta.get("deletionTimestamp"):
                self.server.run_pod(meta["namespace"], meta["name"])

    def finish(self, pod, exit_code=0, **kwargs):
        self.server.finish_pod(pod["metadata"]["namespace"], pod["metadata"]["name"], exit_code, **kwargs)

    def step(self):
        """What a node does on its own: start new pods, end pods being deleted (SIGTERM)."""
        self.start_pending()
        self.server.finalize_deletions()


@pytest.fixture
def kube_cluster(world, kube_server, tmp_path, settings):
    settings.PAI_DATA_DIR = tmp_path
    for node in Node.objects.filter(cluster=world.cluster):
        gpus = node.gpu_capacity
        kube_server.add_node(node.name, gpus=gpus, cpu=str(int(node.cpu_capacity)), memory=f"{node.memory_mb_capacity}Mi")
    for tenant in ("team-a", "team-b"):
        kube_server.create_object("namespaces", {"metadata": {"name": f"pai-{tenant}"}})
        kube_server.add_pvc(f"pai-{tenant}", f"{tenant}-data")
    path = kube_server.write_kubeconfig(tmp_path / "kubeconfig", context="pai-test")
    world.cluster.backend = "kubernetes"
    world.cluster.connection = f"kubeconfig:{path}#pai-test"
    world.cluster.save()
    return world.cluster


@pytest.fixture
def kubelet(kube_server):
    return Kubelet(kube_server)
