"""schemathesis against pai's own OpenAPI schema, in process, authenticated as Team A's member.

Every operation of the schema gets a bounded number of generated requests. Each answer
must be no 5xx, conform to the schema, and contain nothing of Team B (names of its users,
VCs, storage, jobs) and no job secret, unless the request itself sent that text (a 404
message echoes the name asked for). The number of cases that ran is printed and recorded.
"""

import copy

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from apps.accounts import services as account_services
from apps.jobs import services as job_services
from pai.wsgi import application
from tests.jobs.conftest import job_document

EXAMPLES_PER_OPERATION = 6
FUZZ = settings(
    # Derandomized: the same cases on every run, so that CI is reproducible.
    max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
A_SECRETS = {"registry_password": "s3cr3t-Pa55w0rd-team-a", "api_key": "sk-live-team-a-0123456789"}
B_SECRETS = {"registry_password": "s3cr3t-Pa55w0rd-team-b", "api_key": "sk-live-team-b-9876543210"}


def _jobs_with_secrets(w):
    for user, vc, name, secrets in ((w.a_member, "team_a", "a_secret_job", A_SECRETS),
                                    (w.b_member, "team_b", "b_secret_job", B_SECRETS)):
        document = copy.deepcopy(job_document("private_image_secrets.yaml", name=name, secrets=secrets,
                                              defaults={"virtualCluster": vc}))
        job_services.submit_job(user, document)


@pytest.fixture
def wsgi_keeps_the_test_connection():
    """Calling the real WSGI app sends request_started/finished, whose handler closes the
    database connection, and the test's transaction with it; Django's own test client
    disconnects it around each request the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _request_text(case):
    return " ".join(str(part) for part in (case.path_parameters, case.query, case.body, case.headers))


@override_settings(PAI_THROTTLE_JOB_SUBMIT="100000/hour", PAI_THROTTLE_JOB_LIST="100000/min")
def test_schemathesis_finds_no_5xx_no_schema_violation_no_leak(world, capsys, record_property,
                                                              wsgi_keeps_the_test_connection):
    _jobs_with_secrets(world)
    forbidden = ["b_member", "b_admin", "team_b", "team-b", "Team B", "b_secret_job",
                 *A_SECRETS.values(), *B_SECRETS.values()]
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    problems, ran = [], []

    for operation in operations:
        @FUZZ
        @given(case=operation.as_strategy())
        def run(case):
            # A fresh token each time: a fuzzed logout revokes the one it presents. Throttle
            # counters are cleared too: a rate limit would only cut the run short.
            cache.clear()
            _, token = account_services.issue_login_token(world.a_member)
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            ran.append(operation.label)
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, response_schema_conformance, content_type_conformance]
                )
            except (AssertionError, FailureGroup) as exc:
                problems.append((operation.label, response.status_code, str(exc)[:500]))
            sent, text = _request_text(case), response.content.decode("utf-8", "replace")
            leaked = [word for word in forbidden if word in text and word not in sent]
            if leaked:
                problems.append((operation.label, response.status_code, f"leaks {leaked}: {text[:300]}"))

        run()

    record_property("fuzz_cases", len(ran))
    with capsys.disabled():
        print(f"\nschemathesis: {len(ran)} cases over {len(operations)} operations")
    assert not problems, "\n".join(f"{p[0]} {p[1]}: {p[2][:160]!r}" for p in problems[:40])
    assert len(operations) >= 60
    assert len(set(ran)) == len(operations)
