import time

import pytest

from scheduler.backends.local import LocalBackend

NODES = [
    {"name": "gpu-node-1", "gpu": 4, "cpu": 32, "memory_mb": 262144, "labels": {"sku": "A100"}},
    {"name": "gpu-node-2", "gpu": 2, "gpu_ids": ["GPU-aaaa", "GPU-bbbb"], "ip": "127.0.0.2"},
    {"name": "cpu-node-1", "cpu": 8, "memory": 16384},
]


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def backend(state_dir):
    b = LocalBackend(state_dir, NODES)
    yield b
    # Leave nothing running behind a test.
    for pod in b.list_pods():
        b.delete_pod(pod.name, grace_seconds=0)
    b.close()


def wait_for(backend, name, condition, timeout=10.0):
    """Poll the backend until the pod's observation satisfies ``condition``; return it.
    A deleted pod is looked up in the change feed."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [o for o in backend.poll("0") if o.name == name]
        if seen and condition(seen[-1]):
            return seen[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name}: condition not met in {timeout}s; last seen {seen[-1:] }")
        time.sleep(0.02)


def wait_terminal(backend, name, timeout=10.0):
    return wait_for(backend, name, lambda o: o.terminal, timeout)
