import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api():
    def client_for(user=None, address="10.0.0.1"):
        client = APIClient(REMOTE_ADDR=address)
        if user is not None:
            client.force_authenticate(user)
        return client

    return client_for


def login(client, username, password, **extra):
    return client.post("/api/v2/authn/basic/login", {"username": username, "password": password, **extra}, format="json")
