import time

import pytest

from scheduler.backends.kubernetes import Backoff, KubeApi, KubernetesBackend
from tests.kubeserver.fixtures import kube_server  # noqa: F401  (the fixture, for this folder)

FAST_BACKOFF = Backoff(attempts=4, base=0.01, cap=0.05)


def make_backend(server, **options):
    api = KubeApi(server.api_client(retries=False), qps=1000, burst=1000, backoff=options.pop("backoff", FAST_BACKOFF))
    return KubernetesBackend(api, **options)


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
