"""The `kube_server` pytest fixture. Use it from any test folder by importing it in that
folder's conftest.py: `from tests.kubeserver.fixtures import kube_server`. (pytest only
accepts `pytest_plugins` in the top-level conftest.)"""

import pytest

from .server import KubeServer


@pytest.fixture
def kube_server():
    """A fresh, running Kubernetes API test server (see KubeServer for the hooks).

    The test fails if the server hit an internal error while answering it.
    """
    server = KubeServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.internal_errors, "the Kubernetes test server failed:\n" + "\n".join(server.internal_errors)
