"""hypothesis on the job-protocol parser, for what the security promise needs from it.

`tests/jobs/test_fuzz.py` already proves that mutated documents never fail the server;
here the parser itself is driven (no database, thousands of cases a second) to prove
that a job's secret values never reach what pai stores or shows: not the masked spec,
not the protocol text, not an error message, whatever else in the document is broken.
"""

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.jobs.protocol import ProtocolError, parse_job
from tests.jobs.conftest import job_document
from tests.jobs.test_fuzz import _paths, json_values

SECRETS = {"registry_password": "s3cr3t-Pa55w0rd-fuzz", "api_key": "sk-live-fuzz-0123456789"}


@st.composite
def documents_with_secrets(draw):
    """The private-registry job file, its secrets kept, one to three other fields replaced or removed."""
    document = copy.deepcopy(job_document("private_image_secrets.yaml", secrets=dict(SECRETS)))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        paths = [p for p in _paths(document) if p and p[0] != "secrets"]
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()):
            parent[path[-1]] = draw(json_values)
        elif isinstance(parent, dict):
            del parent[path[-1]]
    return document


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents_with_secrets())
def test_secret_values_never_reach_the_spec_the_text_or_an_error(document):
    try:
        parsed = parse_job(document)
    except ProtocolError as exc:
        assert exc.errors and all(": " in line for line in exc.errors), exc.errors
        shown = str(exc)
    else:
        assert parsed.secrets == SECRETS
        shown = f"{parsed.spec} {parsed.protocol_text}"
    for value in SECRETS.values():
        assert value not in shown
