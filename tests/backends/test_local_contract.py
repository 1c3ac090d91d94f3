"""The local backend keeps the backend contract."""

import pytest

from scheduler.backends.local import LocalBackend

from .conftest import NODES
from .contract import BackendContract


class TestLocalBackendContract(BackendContract):
    @pytest.fixture
    def contract_backend(self, tmp_path):
        backend = LocalBackend(tmp_path / "state", NODES)
        yield backend
        for pod in backend.list_pods():
            backend.delete_pod(pod.name, grace_seconds=0)

    @pytest.fixture
    def contract_node(self):
        return "cpu-node-1"
