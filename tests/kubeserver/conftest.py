pytest_plugins = ["tests.kubeserver.fixtures"]
