import copy
import json
import functools
import pathlib

import pytest
import yaml
from django.core.cache import cache
from rest_framework.test import APIClient

JOBFILES = pathlib.Path(__file__).parent / "jobfiles"


@pytest.fixture(autouse=True)
def _fresh_throttles():
    # Throttle counters live in the cache; each test starts with none.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api():
    def client_for(user):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return client_for


def jobfile(name):
    return (JOBFILES / name).read_text()


@functools.cache
def _parsed_jobfile(name):
    return yaml.safe_load(jobfile(name))


def job_document(file="single_gpu.yaml", **changes):
    """A job file as a dict, with top-level keys replaced (None removes a key)."""
    document = copy.deepcopy(_parsed_jobfile(file))
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def submit(client, document, content_type="text/yaml"):
    if content_type == "application/json":
        # ASCII-escaped, as most clients send JSON: lone surrogates survive as \ud800 escapes.
        return client.post("/api/v2/jobs", json.dumps(document), content_type=content_type)
    body = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
    return client.post("/api/v2/jobs", body, content_type=content_type)
