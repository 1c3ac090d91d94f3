"""Random and mutated job documents and random query strings: never a 5xx, never a
half-written job."""

import copy
import json

import yaml
from django.core.cache import cache
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobSecret

from .conftest import job_document

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
UNLIMITED = override_settings(PAI_THROTTLE_JOB_SUBMIT="100000/hour", PAI_THROTTLE_JOB_LIST="100000/min")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.text(max_size=20), st.sampled_from(["job", "2", 2, "A100", "CPU", "team_a", "team_b", "prod", "<% $x.y %>"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@st.composite
def mutated_documents(draw):
    """A real job file with a few fields replaced by random values or removed."""
    document = copy.deepcopy(job_document(draw(st.sampled_from(
        ["single_gpu.yaml", "distributed_tf.yaml", "private_image_secrets.yaml", "storage_plugins.yaml"]
    ))))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(document) if p]
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()):
            parent[path[-1]] = draw(json_values)
        elif isinstance(parent, dict):
            del parent[path[-1]]
    return document


def _encode(document, as_yaml):
    if as_yaml:
        try:
            return yaml.safe_dump(document), "text/yaml"
        except yaml.YAMLError:
            pass
    return json.dumps(document), "application/json"


def _assert_all_or_nothing(response, before):
    assert response.status_code < 500, response.content[:300]
    after = (Job.objects.count(), JobSecret.objects.count(), AuditEntry.objects.count())
    if response.status_code == 202:
        assert after[0] == before[0] + 1 and after[2] == before[2] + 1
    else:
        assert response.json()["code"] and response.json()["message"]
        assert after == before


@UNLIMITED
@FUZZ
@given(document=st.one_of(mutated_documents(), json_values), as_yaml=st.booleans())
def test_random_and_mutated_documents_never_fail_the_server(world, api, document, as_yaml):
    body, content_type = _encode(document, as_yaml)
    before = (Job.objects.count(), JobSecret.objects.count(), AuditEntry.objects.count())

    response = api(world.a_member).post("/api/v2/jobs", body, content_type=content_type)

    _assert_all_or_nothing(response, before)


@UNLIMITED
@FUZZ
@given(body=st.one_of(st.text(max_size=200), st.binary(max_size=200)),
       content_type=st.sampled_from(["text/yaml", "application/json", "text/plain", "application/x-yaml"]))
def test_random_bodies_never_fail_the_server(world, api, body, content_type):
    before = (Job.objects.count(), JobSecret.objects.count(), AuditEntry.objects.count())

    response = api(world.a_member).post("/api/v2/jobs", body, content_type=content_type)

    _assert_all_or_nothing(response, before)


PARAMS = ["username", "vc", "state", "keyword", "tagsContain", "tagsNotContain", "offset", "limit",
          "withTotalCount", "order", "type", "tail-mode", "format"]
query_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["a_member", "team_a,team_b", "RUNNING,WAITING", "jobName,DESC", "state,asc", "-1", "0",
                     "1000", "1001", "true", "x" * 300, "Warning", "json", "yaml"]),
)


@UNLIMITED
@FUZZ
@given(query=st.dictionaries(st.one_of(st.sampled_from(PARAMS), st.text(max_size=8)), query_values, max_size=5),
       route=st.sampled_from(["", "/a_member~first", "/a_member~first/config", "/a_member~first/events",
                              "/a_member~first/job-attempts", "/a_member~first/job-attempts/0",
                              "/b_member~theirs", "/a_member~first/attempts/0/taskRoles/taskrole/taskIndex/0/attempts",
                              "/a_member~first/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"]))
def test_random_query_strings_never_fail_the_server(world, api, query, route):
    from .factories import running_attempt, submitted_job

    if not Job.objects.filter(name="first").exists():
        running_attempt(submitted_job(world.a_member, "first"))
        submitted_job(world.b_member, "theirs")
    cache.clear()  # hypothesis sends hundreds of requests a second: keep the throttles out of the answer
    response = api(world.a_member).get(f"/api/v2/jobs{route}", query)

    assert response.status_code in (200, 400, 403, 404, 406), (response.status_code, response.content[:300])
