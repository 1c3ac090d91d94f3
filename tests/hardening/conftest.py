import pytest
from django.db import connection
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


def every_row_of_every_table():
    """(table, column, value) for every column of every row of every table, as text."""
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            names = [column[0] for column in cursor.description]
            for row in cursor.fetchall():
                for name, value in zip(names, row):
                    yield table, name, value if isinstance(value, (str, bytes, memoryview)) else str(value)


def as_text(value):
    return bytes(value).decode("latin-1") if isinstance(value, (bytes, memoryview)) else value
