"""OpenPAI's routes that its clients call and pai lacked: the `/rest-server` prefix, the
singular `/user` aliases, SKU types, a job's attempt by id, SSH info, job-history health,
and OpenPAI's JSON error for any path under the API that no route matches."""

import pytest
from django.contrib.auth import get_user_model

from apps.jobs.models import JobAttempt
from tests.jobs.factories import running_attempt, submitted_job

from .openpai import assert_error

A100 = {"cpu": 8, "memory": 65536, "gpu": 1}
CPU = {"cpu": 4, "memory": 16384, "gpu": 0}


# -- /rest-server, as OpenPAI's SDK and CLI address the REST server ---------------------
def test_the_rest_server_prefix_serves_the_same_api(world, clients, anonymous):
    assert anonymous.get("/rest-server/api/v2/info").json() == anonymous.get("/api/v2/info").json()
    member = clients["a_member"]
    assert member.get("/rest-server/api/v2/virtual-clusters").json() == member.get("/api/v2/virtual-clusters").json()
    job = submitted_job(world.a_member, name="through_prefix")
    detail = member.get(f"/rest-server/api/v2/jobs/a_member~{job.name}")
    assert detail.status_code == 200 and detail.json()["name"] == "through_prefix"
    assert_error(anonymous.get("/rest-server/api/v2/jobs"), 401, "UnauthorizedUserError")
    # Only the API is under the prefix.
    assert anonymous.get("/rest-server/admin/").status_code == 404


@pytest.mark.parametrize("path", ["/api/v2/no-such-route", "/api/v2/jobs/a_member~x/nonsense/deeper",
                                  "/rest-server/api/v2/nope", "/api/v3/jobs"])
@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
def test_an_unknown_path_under_the_api_answers_json_not_found(world, clients, anonymous, path, method):
    for client in (anonymous, clients["a_member"]):
        response = getattr(client, method)(path)
        message = assert_error(response, 404, "NotFoundError")
        assert path in message


def test_a_route_asked_without_its_trailing_slash_is_redirected_as_before(anonymous):
    response = anonymous.get("/api/docs?x=1")
    assert response.status_code == 301 and response["Location"] == "/api/docs/?x=1"


# -- SKU types ----------------------------------------------------------------------------
def test_sku_types_of_a_vc_and_of_the_cluster(world, clients):
    member = clients["a_member"]
    assert member.get("/api/v2/virtual-clusters/team_a/sku-types").json() == {"A100": A100, "CPU": CPU}
    assert member.get("/api/v2/cluster/sku-types").json() == {"A100": A100, "CPU": CPU}
    assert member.get("/api/v2/cluster/sku-types?vc=team_a").json() == {"A100": A100, "CPU": CPU}
    assert_error(member.get("/api/v2/virtual-clusters/team_b/sku-types"), 404, "NoVirtualClusterError")
    assert_error(member.get("/api/v2/cluster/sku-types?vc=team_b"), 404, "NoVirtualClusterError")


def test_a_vc_without_cells_of_a_sku_does_not_list_it(world, clients):
    world.vc_a.cells.filter(cell_type=world.cpu_node).delete()
    from apps.virtualclusters.capacity import forget_topology

    forget_topology()
    assert clients["a_member"].get("/api/v2/virtual-clusters/team_a/sku-types").json() == {"A100": A100}


# -- a job's attempt, SSH info, job history health ----------------------------------------
def test_a_job_attempt_by_id_in_the_job_detail_shape(world, clients):
    job = submitted_job(world.a_member, name="retried")
    first = running_attempt(job)
    first.state, first.sub_state, first.exit_code, first.exit_spec_code = "FAILED", "Completed", 137, 137
    first.save()
    JobAttempt.objects.create(job=job, index=1, state="WAITING", sub_state="AttemptCreationRequested")
    member = clients["a_member"]

    latest = member.get("/api/v2/jobs/a_member~retried").json()
    assert latest["jobStatus"]["attemptId"] == 1
    old = member.get("/api/v2/jobs/a_member~retried/attempts/0").json()
    assert old["jobStatus"]["attemptId"] == 0 and old["jobStatus"]["attemptState"] == "FAILED"
    assert [t["taskIndex"] for t in old["taskRoles"]["taskrole"]["taskStatuses"]] == [0]
    assert set(old) == set(latest)
    assert_error(member.get("/api/v2/jobs/a_member~retried/attempts/5"), 404, "NoJobError")
    assert_error(clients["b_member"].get("/api/v2/jobs/a_member~retried/attempts/0"), 404, "NoJobError")


def test_ssh_info_is_openpais_not_found_as_pai_runs_no_ssh_plugin(world, clients):
    job = submitted_job(world.a_member, name="no_ssh")
    assert_error(clients["a_member"].get(f"/api/v2/jobs/a_member~{job.name}/ssh"), 404, "NoJobSshInfoError")
    assert_error(clients["b_member"].get(f"/api/v2/jobs/a_member~{job.name}/ssh"), 404, "NoJobError")


def test_job_history_is_healthy(world, clients, anonymous):
    assert clients["a_member"].get("/api/v2/job-attempts/healthz").status_code == 200
    assert clients["a_member"].get("/api/v2/jobs/a_member~any/job-attempts/healthz").status_code == 200
    assert_error(anonymous.get("/api/v2/job-attempts/healthz"), 401, "UnauthorizedUserError")


# -- the singular /api/v2/user aliases -----------------------------------------------------
def test_the_singular_user_routes_answer_as_the_plural_ones(world, clients):
    root, member = clients["root"], clients["a_member"]
    assert member.get("/api/v2/user/a_member").json() == member.get("/api/v2/users/a_member").json()
    assert root.get("/api/v2/user").json() == root.get("/api/v2/users").json()

    assert root.put("/api/v2/user/a_member/email", {"email": "new@example.com"}, format="json").status_code == 201
    assert get_user_model().objects.get(username="a_member").email == "new@example.com"
    assert root.put("/api/v2/user/a_member/admin", {"admin": True}, format="json").status_code == 201
    assert root.get("/api/v2/users/a_member").json()["admin"] is True
    assert root.put("/api/v2/user/a_member/admin", {"admin": False}, format="json").status_code == 201


def test_your_own_password_through_the_singular_route_needs_the_old_one(world, clients):
    member = clients["a_member"]
    wrong = member.put("/api/v2/user/a_member/password", {"oldPassword": "nope", "newPassword": "n3w-passphrase!"},
                       format="json")
    assert wrong.status_code == 400
    right = member.put("/api/v2/user/a_member/password",
                       {"oldPassword": world.password, "newPassword": "n3w-passphrase!"}, format="json")
    assert right.status_code == 201, right.json()
    assert get_user_model().objects.get(username="a_member").check_password("n3w-passphrase!")


def test_members_may_not_change_others_through_the_singular_routes(world, clients):
    member = clients["a_member"]
    assert_error(member.put("/api/v2/user/a_member/admin", {"admin": True}, format="json"), 403, "ForbiddenUserError")
    assert_error(member.put("/api/v2/user/b_member/email", {"email": "x@example.com"}, format="json"), 403,
                 "ForbiddenUserError")
    assert_error(clients["root"].put("/api/v2/user/a_member/email", {}, format="json"), 400,
                 "InvalidParametersError")
