"""The Kubernetes backend keeps the backend contract, against the Kubernetes API test server."""

import pytest

from tests.backends.contract import BackendContract

from .conftest import make_backend


class TestKubernetesBackendContract(BackendContract):
    @pytest.fixture
    def contract_backend(self, kube_server):
        kube_server.add_node("contract-node", gpus=2)
        backend = make_backend(kube_server)
        yield backend
        backend.close()

    @pytest.fixture
    def contract_node(self):
        return "contract-node"
