"""Documents built to exhaust the server: alias bombs, deep nesting, oversize bodies, jobs asking
for more than any host or framework holds. Each is refused with a 4xx naming the bound, before
anything expands; the same bounds leave ordinary documents alone."""

import json

import pytest
import yaml
from rest_framework.test import APIClient

from apps.jobs.models import Job
from tests.jobs.conftest import job_document, submit

pytestmark = pytest.mark.django_db


def _job_yaml(**extras):
    document = job_document()
    document["extras"].update(extras)
    return yaml.safe_dump(document, sort_keys=False)


def _alias_bomb(levels, width=9):
    """`levels` lists of `width` aliases, each to the list before: width**levels strings once expanded."""
    lines = ["bomb_0: &bomb_0 [xxxxxxxx]"]
    for level in range(1, levels + 1):
        lines.append(f"bomb_{level}: &bomb_{level} [" + ", ".join([f"*bomb_{level - 1}"] * width) + "]")
    return lines


def _with_extras_yaml(extra_lines):
    """The job file with `extra_lines` (YAML text, one mapping entry each) added under `extras`."""
    text = _job_yaml()
    return text.replace("extras:\n", "extras:\n" + "".join(f"  {line}\n" for line in extra_lines), 1)


def test_an_alias_bomb_is_refused_before_it_expands(world, clients):
    body = _with_extras_yaml(_alias_bomb(6))  # 63 aliases in ~500 bytes: 9**6 strings once expanded
    assert len(body.encode()) < 2048
    response = submit(clients["a_member"], body)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["message"] == "body: is larger than 1048576 characters once its aliases are expanded"
    assert not Job.objects.exists()


def test_more_aliases_than_the_limit_are_refused(world, clients):
    body = _with_extras_yaml(["anchor: &word w", "many: [" + ", ".join(["*word"] * 101) + "]"])
    response = submit(clients["a_member"], body)
    assert response.status_code == 400
    assert response.json()["message"] == "body: uses more than 100 aliases (*name)"


def test_a_recursive_alias_is_a_clear_400(world, clients):
    body = _with_extras_yaml(["loop: &loop {again: *loop}"])
    response = submit(clients["a_member"], body)
    assert response.status_code == 400
    message = response.json()["message"]
    assert message.startswith("body: the node anchored at line ") and message.endswith("(a recursive alias)")


ANCHORED_JOB = """\
protocolVersion: 2
name: anchored
type: job
prerequisites:
  - {type: dockerimage, name: image, uri: "openpai/standard:python_3.6-pytorch_1.2.0-gpu"}
taskRoles:
  first:
    dockerImage: image
    resourcePerInstance: &resources {gpu: 1, cpu: 8, memoryMB: 16384}
    commands: &commands [python main.py]
  second:
    dockerImage: image
    resourcePerInstance: *resources
    commands: *commands
defaults: {virtualCluster: team_a}
"""


def test_a_job_file_sharing_blocks_through_anchors_is_accepted(world, clients):
    # What a hand-written file may do: two task roles with one resource block and one command list.
    response = submit(clients["a_member"], ANCHORED_JOB)
    assert response.status_code == 202, response.content
    spec = Job.objects.get(name="anchored").spec
    assert spec["taskRoles"]["second"]["resourcePerInstance"] == {"gpu": 1, "cpu": 8, "memoryMB": 16384, "ports": {}}
    assert spec["taskRoles"]["second"]["commands"] == ["python main.py"]


def test_yaml_nested_deeper_than_the_limit_is_refused(world, clients):
    nested = "deep: " + "{a: " * 70 + "1" + "}" * 70
    response = submit(clients["a_member"], _with_extras_yaml([nested]))
    assert response.status_code == 400
    assert response.json()["message"] == "body: is nested more than 64 levels deep"


@pytest.mark.parametrize("route, authenticated", [
    ("/api/v2/jobs", True),
    ("/api/v2/authn/basic/login", False),  # before any authentication
    ("/api/v2/users/me", True),
])
def test_json_nested_twenty_thousand_deep_is_a_400(world, clients, route, authenticated):
    client = clients["a_member"] if authenticated else APIClient()
    body = '{"a": ' * 20_000 + "1" + "}" * 20_000
    method = client.put if route.endswith("/me") else client.post
    response = method(route, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json() == {
        "code": "InvalidParametersError", "message": "JSON parse error - the body is nested more than 64 levels deep",
    }


def test_a_job_document_over_the_size_limit_is_a_413_before_it_is_read(world, clients):
    document = job_document(name="huge", description="x" * (256 * 1024))
    response = submit(clients["a_member"], document)
    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "PayloadTooLargeError"
    assert body["message"].startswith("The job document is ") and body["message"].endswith(
        "bytes; the limit is 262144 bytes.")
    response = submit(clients["a_member"], document, content_type="application/json")
    assert response.status_code == 413
    assert not Job.objects.exists()


def test_a_job_document_just_under_the_limit_is_accepted(world, clients):
    document = job_document(name="large", description="")
    size = len(yaml.safe_dump(document, sort_keys=False).encode())
    document["description"] = "x" * (256 * 1024 - size - 64)
    assert submit(clients["a_member"], document).status_code == 202


def test_any_api_body_over_djangos_upload_limit_is_a_413(world, clients, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    body = json.dumps({"email": "a@example.com", "padding": "x" * (64 * 1024)})
    response = clients["a_member"].put("/api/v2/users/me", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["code"] == "PayloadTooLargeError"
    response = clients["a_member"].put("/api/v2/users/me", f"email=a%40example.com&p={'x' * 65536}",
                                       content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413


def test_a_non_gang_job_of_a_hundred_thousand_instances_is_refused_with_the_limit(world, clients):
    document = job_document(name="wide")
    document["extras"]["gangAllocation"] = False
    document["taskRoles"]["taskrole"]["instances"] = 100_000
    response = submit(clients["a_member"], document)
    assert response.status_code == 400
    assert response.json()["message"] == (
        "taskRoles: the job has 100000 tasks (instances of all task roles); at most 10000 are allowed per job")
    assert not Job.objects.exists()


@pytest.mark.parametrize("instances, ports, message", [
    (1, {"p": 2147483647}, "taskRoles.taskrole.resourcePerInstance.ports: each task would hold 2147483649 host "
                           "ports; at most 100 are allowed per task"),
    (4, {"p": 6000}, "taskRoles.taskrole.resourcePerInstance.ports: each task would hold 6002 host ports; at most "
                     "100 are allowed per task"),
    (300, {"p": 98}, "taskRoles: the job's tasks would hold 30000 host ports in all; a host offers 20000 "
                     "(20000-39999)"),
])
def test_ports_beyond_a_task_or_a_host_are_refused_at_submit(world, clients, instances, ports, message):
    document = job_document(name="ports")
    document["taskRoles"]["taskrole"]["instances"] = instances
    document["taskRoles"]["taskrole"]["resourcePerInstance"]["ports"] = ports
    response = submit(clients["a_member"], document)
    assert response.status_code == 400
    assert response.json()["message"] == message
