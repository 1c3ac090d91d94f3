from tests.kubeserver.fixtures import kube_server  # noqa: F401  (the fixture, for this folder)
