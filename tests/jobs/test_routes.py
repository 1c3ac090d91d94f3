"""The OpenPAI job routes: list filters and paging, detail, stop, tags, attempts, events, logs."""

import pytest
from django.test import override_settings

from apps.audit.models import AuditEntry
from apps.jobs.models import Job, JobAttempt, JobTag

from .factories import running_attempt, submitted_job


def _names(response):
    assert response.status_code == 200, response.json()
    return [job["name"] for job in response.json()]


@pytest.fixture
def jobs(world):
    """Three jobs in team A's VC (two by a_member) and one in team B's."""
    first = submitted_job(world.a_member, "first", gpu=1)
    second = submitted_job(world.a_member, "second", gpu=4)
    third = submitted_job(world.a_admin, "third", gpu=2)
    other = submitted_job(world.b_member, "other")
    JobTag.objects.create(job=first, name="baseline")
    JobTag.objects.create(job=second, name="sweep")
    Job.objects.filter(pk=second.pk).update(state="RUNNING")
    return {"first": first, "second": second, "third": third, "other": other}


def test_the_list_is_newest_first_and_scoped(world, api, jobs):
    assert _names(api(world.a_member).get("/api/v2/jobs")) == ["third", "second", "first"]
    assert _names(api(world.b_member).get("/api/v2/jobs")) == ["other"]
    assert _names(api(world.root).get("/api/v2/jobs")) == ["other", "third", "second", "first"]


@pytest.mark.parametrize(
    "query,expected",
    [
        ("username=a_member", ["second", "first"]),
        ("username=a_member,a_admin", ["third", "second", "first"]),
        ("vc=team_a", ["third", "second", "first"]),
        ("vc=team_b", []),
        ("state=RUNNING", ["second"]),
        ("state=WAITING,RUNNING", ["third", "second", "first"]),
        ("keyword=ir", ["third", "first"]),
        ("keyword=a_admin", ["third"]),
        ("keyword=team_a", ["third", "second", "first"]),
        ("tagsContain=baseline,sweep", ["second", "first"]),
        ("tagsNotContain=baseline", ["third", "second"]),
        ("order=jobName,ASC", ["first", "second", "third"]),
        ("order=totalGpuNumber,DESC", ["second", "third", "first"]),
        ("order=submissionTime,ASC", ["first", "second", "third"]),
        ("offset=1&limit=1", ["second"]),
        ("offset=5", []),
    ],
)
def test_list_filters_ordering_and_paging(world, api, jobs, query, expected):
    assert _names(api(world.a_member).get(f"/api/v2/jobs?{query}")) == expected


def test_with_total_count_wraps_the_page(world, api, jobs):
    body = api(world.a_member).get("/api/v2/jobs?withTotalCount=true&limit=2").json()

    assert body["totalCount"] == 3
    assert [job["name"] for job in body["data"]] == ["third", "second"]
    assert body["data"][1]["tags"] == ["sweep"]


@pytest.mark.parametrize(
    "query,message",
    [
        ("limit=0", "limit: must be between 1 and 1000"),
        ("limit=abc", "limit: must be an integer"),
        ("offset=-1", "offset: must be ≥ 0"),
        ("state=PAUSED", "state: unknown state PAUSED; use WAITING, RUNNING, STOPPING, STOPPED, SUCCEEDED, FAILED, UNKNOWN"),
        ("order=owner,ASC", "order: must be <field>,ASC|DESC with field one of jobName, submissionTime, username, vc, "
                            "retries, totalTaskNumber, totalGpuNumber, state, completionTime"),
        ("order=jobName,UP", "order: the direction must be ASC or DESC"),
    ],
)
def test_bad_list_parameters_are_400_naming_the_parameter(world, api, query, message):
    response = api(world.a_member).get(f"/api/v2/jobs?{query}")

    assert response.status_code == 400
    assert response.json()["message"] == message


@pytest.mark.parametrize("method,path", [
    ("get", "/api/v2/jobs"), ("post", "/api/v2/jobs"), ("get", "/api/v2/jobs/a_member~first"),
    ("get", "/api/v2/jobs/a_member~first/config"), ("put", "/api/v2/jobs/a_member~first/executionType"),
])
def test_anonymous_requests_are_401(world, api, jobs, method, path):
    response = getattr(api(None), method)(path)
    assert response.status_code == 401
    assert response.json()["code"] == "UnauthorizedUserError"
    assert Job.objects.get(pk=jobs["first"].pk).execution_type == "START"


def test_stopping_a_job_without_pods_ends_it_stopped(world, api, jobs):
    client = api(world.a_member)
    response = client.put("/api/v2/jobs/a_member~first/executionType", {"value": "STOP"}, format="json")

    assert response.status_code == 202
    assert response.json() == {"message": "execute job first successfully"}
    status = client.get("/api/v2/jobs/a_member~first").json()["jobStatus"]
    assert (status["state"], status["subState"], status["executionType"]) == ("STOPPED", "Completed", "STOP")
    assert status["appExitCode"] == -210 and status["completedTime"] is not None
    assert AuditEntry.objects.filter(action="job.stop", object_id=str(jobs["first"].pk)).count() == 1
    # Stopping again changes nothing; starting a stopped job is refused.
    assert client.put("/api/v2/jobs/a_member~first/executionType", {"value": "STOP"}, format="json").status_code == 202
    assert AuditEntry.objects.filter(action="job.stop").count() == 1


def test_stopping_a_job_with_pods_leaves_it_stopping_for_the_worker(world, api, jobs):
    running_attempt(jobs["first"])
    client = api(world.a_member)
    response = client.put("/api/v2/jobs/a_member~first/executionType", {"value": "STOP"}, format="json")

    assert response.status_code == 202
    job = Job.objects.get(pk=jobs["first"].pk)
    assert (job.state, job.sub_state, job.execution_type) == ("STOPPING", "AttemptDeletionPending", "STOP")
    assert job.completed_at is None


def test_start_and_bad_execution_types(world, api, jobs):
    client = api(world.a_member)
    url = "/api/v2/jobs/a_member~first/executionType"
    assert client.put(url, {"value": "START"}, format="json").status_code == 202
    bad = client.put(url, {"value": "PAUSE"}, format="json")
    assert (bad.status_code, bad.json()["message"]) == (400, "value: must be START or STOP")
    client.put(url, {"value": "STOP"}, format="json")
    restart = client.put(url, {"value": "START"}, format="json")
    assert restart.status_code == 202  # a completed job ignores execution type changes, as in OpenPAI
    assert Job.objects.get(pk=jobs["first"].pk).state == "STOPPED"


def test_tags_are_added_and_removed(world, api, jobs):
    client = api(world.a_member)
    url = "/api/v2/jobs/a_member~third/tag"
    admin = api(world.a_admin)
    assert admin.put(url.replace("a_member", "a_admin"), {"value": "v2"}, format="json").status_code == 200
    assert admin.put(url.replace("a_member", "a_admin"), {"value": "v2"}, format="json").status_code == 200
    assert _names(client.get("/api/v2/jobs?tagsContain=v2")) == ["third"]
    response = admin.delete(url.replace("a_member", "a_admin"), {"value": "v2"}, format="json")
    assert response.status_code == 200
    assert not JobTag.objects.filter(job=jobs["third"]).exists()
    assert list(AuditEntry.objects.filter(action__startswith="job.tag").values_list("action", flat=True)) == [
        "job.tag.remove", "job.tag.add",
    ]
    bad = admin.put(url.replace("a_member", "a_admin"), {"value": ""}, format="json")
    assert (bad.status_code, bad.json()["message"]) == (400, "value: must be a non-empty string")
    long = admin.put(url.replace("a_member", "a_admin"), {"value": "x" * 256}, format="json")
    assert (long.status_code, long.json()["message"]) == (400, "value: must be at most 255 characters")


def test_detail_attempts_and_task_attempts_of_a_running_job(world, api, jobs):
    running_attempt(jobs["third"])
    client = api(world.a_admin)

    detail = client.get("/api/v2/jobs/a_admin~third").json()
    assert detail["jobStatus"]["state"] == "RUNNING" and detail["jobStatus"]["attemptId"] == 0
    status = detail["taskRoles"]["taskrole"]["taskStatuses"][0]
    assert status["taskIndex"] == 0 and status["taskState"] == "RUNNING"
    assert status["containerNodeName"] == "gpu-node-1" and status["containerIp"] == "10.0.0.5"
    assert status["containerGpus"] == "0" and status["containerPorts"] == {"ssh": 30022}
    # OpenPAI's containerLog: the path of the attempt's log locations.
    assert status["containerLog"] == "/api/v2/jobs/a_admin~third/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"

    attempts = client.get("/api/v2/jobs/a_admin~third/job-attempts").json()
    assert [(a["attemptIndex"], a["isLatest"], a["state"]) for a in attempts] == [(0, True, "RUNNING")]
    assert attempts[0]["maxAttemptCount"] == 1 and attempts[0]["frameworkName"] == "a_admin~third"
    one = client.get("/api/v2/jobs/a_admin~third/job-attempts/0").json()
    assert one["taskRoles"]["taskrole"]["taskStatuses"][0]["containerId"] == f"uid-{jobs['third'].pk}-0"
    missing = client.get("/api/v2/jobs/a_admin~third/job-attempts/7")
    assert (missing.status_code, missing.json()["code"]) == (404, "NoJobError")

    tasks = client.get("/api/v2/jobs/a_admin~third/attempts/0/taskRoles/taskrole/taskIndex/0/attempts").json()
    assert tasks["taskRoleName"] == "taskrole" and tasks["jobAttemptId"] == 0
    assert [(a["attemptId"], a["attemptState"], a["containerNodeName"]) for a in tasks["attempts"]] == [
        (0, "RUNNING", "gpu-node-1")
    ]
    assert client.get(
        "/api/v2/jobs/a_admin~third/attempts/0/taskRoles/taskrole/taskIndex/3/attempts"
    ).status_code == 404


def test_a_queued_job_has_no_attempts(world, api, jobs):
    assert api(world.a_member).get("/api/v2/jobs/a_member~first/job-attempts").json() == []


def test_events_are_listed_and_filtered_by_type(world, api, jobs):
    running_attempt(jobs["third"])
    client = api(world.a_admin)
    body = client.get("/api/v2/jobs/a_admin~third/events").json()

    # OpenPAI's shape: {totalCount, data}, newest first, times in ISO 8601, the framework by its debug id.
    assert body["totalCount"] == 1
    event = body["data"][0]
    assert (event["type"], event["reason"], event["taskroleName"]) == ("Normal", "Started", "taskrole")
    assert event["frameworkName"] == jobs["third"].debug_id and event["taskName"].endswith("-taskrole-0-0")
    assert event["firstTimestamp"].endswith("Z") and "T" in event["firstTimestamp"]
    assert client.get("/api/v2/jobs/a_admin~third/events?type=Warning").json() == {"totalCount": 0, "data": []}
    bad = client.get("/api/v2/jobs/a_admin~third/events?type=Fatal")
    assert (bad.status_code, bad.json()["message"]) == (400, "type: must be Normal or Warning")


def test_log_locations_list_only_logs_that_exist(world, api, jobs, tmp_path):
    with override_settings(PAI_DATA_DIR=tmp_path):
        log = tmp_path / "logs" / "pod.log"
        log.parent.mkdir()
        running_attempt(jobs["first"], log_path=str(log))
        running_attempt(jobs["third"], log_path="")
        client = api(world.a_member)
        base = "/api/v2/jobs/a_member~first/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"

        assert client.get(base).json() == {"locations": []}  # the pod has not written it yet
        log.write_text("".join(f"step {i}\n" for i in range(5000)))
        locations = client.get(base).json()["locations"]
        assert [entry["name"] for entry in locations] == ["all"]
        assert locations[0]["uri"] == f"http://testserver{base}/all"
        full = client.get(f"{base}/all")
        assert full.status_code == 200 and b"".join(full.streaming_content).startswith(b"step 0\n")
        tail = b"".join(client.get(f"{base}/all?tail-mode=true").streaming_content)
        assert len(tail) == 16 * 1024 and tail.endswith(b"step 4999\n")
        # Asked with tail mode, the locations point at the tail (OpenPAI's `tail-mode`, the JS SDK's `tailMode`).
        for query in ("tail-mode=true", "tailMode=true"):
            assert client.get(f"{base}?{query}").json()["locations"][0]["uri"].endswith("/all?tail-mode=true")
        admin = api(world.a_admin)
        empty = "/api/v2/jobs/a_admin~third/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"
        assert admin.get(empty).json() == {"locations": []}
        assert admin.get(f"{empty}/all").status_code == 404


def test_a_log_path_outside_the_data_directory_is_never_served(world, api, jobs, tmp_path):
    with override_settings(PAI_DATA_DIR=tmp_path / "data"):
        running_attempt(jobs["first"], log_path="/etc/passwd")
        base = "/api/v2/jobs/a_member~first/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"
        client = api(world.a_member)
        assert client.get(base).json() == {"locations": []}
        assert client.get(f"{base}/all").status_code == 404


def test_config_is_yaml_by_default_and_json_on_request(world, api, jobs):
    client = api(world.a_member)
    as_yaml = client.get("/api/v2/jobs/a_member~first/config")
    as_json = client.get("/api/v2/jobs/a_member~first/config", HTTP_ACCEPT="application/json")

    assert as_yaml["Content-Type"].startswith("text/yaml")
    assert as_yaml.content.decode().startswith("protocolVersion: 2\nname: first\n")
    assert as_json.json()["name"] == "first"
    missing = client.get("/api/v2/jobs/a_member~nothing/config")
    assert missing["Content-Type"].startswith("application/json")
    assert missing.json() == {"code": "NoJobError", "message": "Job a_member~nothing is not found."}
    assert JobAttempt.objects.count() == 0


def test_list_rows_have_exactly_the_documented_summary_fields(world, api, jobs):
    from apps.jobs.api.serializers import JobSummarySerializer

    rows = api(world.a_member).get("/api/v2/jobs").json()
    assert [set(row) for row in rows] == [set(JobSummarySerializer().fields)] * 3
    first = next(row for row in rows if row["name"] == "first")
    assert first["tags"] == ["baseline"]
    assert first["debugId"] == jobs["first"].debug_id


def test_routes_answer_with_a_trailing_slash_too(world, api, jobs):
    client = api(world.a_member)
    assert _names(client.get("/api/v2/jobs/")) == ["third", "second", "first"]
    assert client.get("/api/v2/jobs/a_member~first/").json()["name"] == "first"
    response = client.put("/api/v2/jobs/a_member~first/executionType/", {"value": "STOP"}, format="json")
    assert response.status_code == 202
