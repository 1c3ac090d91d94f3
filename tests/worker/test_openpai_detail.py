"""Jobs run by the worker on the local backend, read back as OpenPAI's clients read them:
the job detail, job attempts and events validated against OpenPAI's swagger, task states
as OpenPAI shows them, and FrameworkController's task and job retry policies."""

from rest_framework.test import APIClient

from apps.jobs.models import Job, Task
from tests.jobs.openpai_swagger import JOB_ATTEMPT, JOB_DETAIL, JOB_EVENTS, assert_valid

from .conftest import job_yaml


def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def detail(user, job, suffix=""):
    response = api(user).get(f"/api/v2/jobs/{job.owner.username}~{job.name}{suffix}")
    assert response.status_code == 200, response.content
    return response.json()


def statuses(body):
    return {(role, t["taskIndex"]): t for role, tr in body["taskRoles"].items() for t in tr["taskStatuses"]}


def test_a_running_then_stopped_job_as_openpai_shows_it(world, worker, submit):
    job = submit(world.a_member, job_yaml("serving", roles={
        "gpu": {"gpu": 1, "commands": ["sleep 60"]},
        "cpu": {"gpu": 0, "commands": ["sleep 60"]},
    }))
    worker.run_until(lambda: set(Task.objects.filter(job_attempt__job=job).values_list("state", flat=True))
                     == {"RUNNING"})

    running = assert_valid(JOB_DETAIL, detail(world.a_member, job))
    assert running["jobStatus"]["state"] == "RUNNING"
    tasks = statuses(running)
    assert {(t["taskState"], t["attemptState"]) for t in tasks.values()} == {("RUNNING", "RUNNING")}
    assert tasks[("cpu", 0)]["containerGpus"] is None  # a CPU-only task holds no GPU
    assert tasks[("gpu", 0)]["containerGpus"] is not None
    assert running["jobStatus"]["appExitSpec"] is None and running["jobStatus"]["appCreatedTime"]

    response = api(world.a_member).put("/api/v2/jobs/a_member~serving/executionType", {"value": "STOP"},
                                       format="json")
    assert response.status_code == 202
    worker.wait_for_state(job, "STOPPED")

    stopped = assert_valid(JOB_DETAIL, detail(world.a_member, job))
    status = stopped["jobStatus"]
    assert (status["state"], status["appExitCode"], status["appExitType"]) == ("STOPPED", -210, "Failed")
    assert status["appExitSpec"]["phrase"] == "StopFrameworkRequested"
    assert status["appExitTriggerMessage"] == "stopped by the user"
    assert {(t["taskState"], t["containerExitCode"], t["containerExitSpec"]["phrase"])
            for t in statuses(stopped).values()} == {("STOPPED", -210, "StopFrameworkRequested")}
    attempts = api(world.a_member).get("/api/v2/jobs/a_member~serving/job-attempts").json()
    for attempt in attempts:
        assert_valid(JOB_ATTEMPT, attempt)
    assert_valid(JOB_EVENTS, api(world.a_member).get("/api/v2/jobs/a_member~serving/events").json())


def test_a_failed_job_keeps_its_exit_code_with_openpais_exit_spec(world, worker, submit):
    job = submit(world.a_member, job_yaml("crashes", roles={"main": {"commands": ["echo loading", "exit 1"]}}))
    worker.wait_for_state(job, "FAILED")

    failed = assert_valid(JOB_DETAIL, detail(world.a_member, job))
    status = failed["jobStatus"]
    assert status["appExitCode"] == 1
    spec = status["appExitSpec"]
    assert (spec["code"], spec["phrase"], spec["reaction"]) == (1, "PAIRuntimeExitAbnormally", "RETRY_TO_MAX")
    assert isinstance(spec["solution"], list) and spec["solution"]
    assert status["appExitType"] == "Failed" and status["appExitTriggerTaskRoleName"] == "main"
    assert status["appExitTriggerMessage"].startswith("MinFailedTaskCount 1 has been reached in task role main")
    assert "loading" in status["appExitMessages"]["launcher"]
    task = statuses(failed)[("main", 0)]
    assert (task["taskState"], task["containerExitCode"], task["containerExitSpec"]["code"]) == ("FAILED", 1, 1)
    by_id = assert_valid(JOB_DETAIL, detail(world.a_member, job, "/attempts/0"))
    assert by_id["jobStatus"]["appExitSpec"] == spec


def test_without_gang_allocation_a_task_is_retried_on_its_own(world, worker, submit):
    # Task 0 fails twice (exit 3, an unknown failure: counted), then succeeds; task 1 succeeds at once.
    # The count is kept on the team's default storage: a sandboxed task sees no host path.
    counter = '"$PAI_STORAGE_TEAM_A_DATA/runs"'
    script = (
        'if [ "$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX" = 0 ]; then '
        f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; '
        'echo "run $n"; [ "$n" -ge 2 ] || exit 3; fi; echo done'
    )
    text = job_yaml("flaky", roles={"main": {"instances": 2, "commands": [script]}}, extras={"gangAllocation": False})
    text = text.replace("    commands:", "    taskRetryCount: 2\n    commands:")
    job = submit(world.a_member, text)
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")

    assert job.state == "SUCCEEDED", job.attempts.first().exit_diagnostics
    assert (job.retries, job.attempts.count()) == (0, 1)  # the job itself was not retried
    body = assert_valid(JOB_DETAIL, detail(world.a_member, job))
    flaky, steady = statuses(body)[("main", 0)], statuses(body)[("main", 1)]
    assert (flaky["taskState"], flaky["retries"], flaky["accountableRetries"], flaky["attemptId"]) == (
        "SUCCEEDED", 2, 2, 2)
    assert (steady["retries"], steady["attemptId"]) == (0, 0)
    history = api(world.a_member).get(
        "/api/v2/jobs/a_member~flaky/attempts/0/taskRoles/main/taskIndex/0/attempts").json()
    assert [(a["attemptId"], a["attemptState"], a["containerExitCode"]) for a in history["attempts"]] == [
        (0, "FAILED", 3), (1, "FAILED", 3), (2, "SUCCEEDED", 0)]
    logs = [worker.controller.backend.read_log(ta.pod_name)
            for ta in Task.objects.get(job_attempt__job=job, index=0).attempts.order_by("index")]
    assert ["run 0" in logs[0], "run 1" in logs[1], "done" in logs[2]] == [True, True, True]


def test_a_task_that_uses_up_its_retries_fails_the_job(world, worker, submit):
    text = job_yaml("hopeless", roles={"main": {"commands": ["exit 3"]}}, extras={"gangAllocation": False})
    job = submit(world.a_member, text.replace("    commands:", "    taskRetryCount: 1\n    commands:"))
    job = worker.wait_for_state(job, "FAILED", "SUCCEEDED")

    assert (job.state, job.app_exit_code) == ("FAILED", 3)
    task = statuses(assert_valid(JOB_DETAIL, detail(world.a_member, job)))[("main", 0)]
    assert (task["taskState"], task["retries"], task["attemptId"]) == ("FAILED", 1, 1)


def test_job_retry_count_minus_two_runs_the_job_again_after_success_until_stopped(world, worker, submit):
    job = submit(world.a_member, job_yaml("forever", retry=-2, roles={"main": {"commands": ["echo served"]}}))
    worker.run_until(lambda: Job.objects.get(pk=job.pk).retries >= 2)
    job.refresh_from_db()
    assert job.state != "SUCCEEDED" and job.attempts.count() >= 2
    assert {a.exit_code for a in job.attempts.exclude(completed_at=None)} == {0}
    # The retried job as OpenPAI's clients read it: its retries, the latest attempt, and a
    # finished earlier attempt by id with its own (successful) exit.
    retried = assert_valid(JOB_DETAIL, detail(world.a_member, job))["jobStatus"]
    latest = job.attempts.order_by("-index").first()
    assert (retried["retries"], retried["attemptId"], retried["attemptState"]) == (
        job.retries, latest.index, latest.state)
    assert retried["retryDetails"] == job.retry_details and sum(retried["retryDetails"].values()) == job.retries
    first = assert_valid(JOB_DETAIL, detail(world.a_member, job, "/attempts/0"))["jobStatus"]
    assert (first["attemptId"], first["attemptState"], first["appExitCode"]) == (0, "SUCCEEDED", 0)

    api(world.a_member).put("/api/v2/jobs/a_member~forever/executionType", {"value": "STOP"}, format="json")
    job = worker.wait_for_state(job, "STOPPED")
    assert job.app_exit_code == -210
    attempts = api(world.a_member).get("/api/v2/jobs/a_member~forever/job-attempts").json()
    assert attempts[0]["maxAttemptCount"] is None  # retried without limit
    for attempt in attempts:
        assert_valid(JOB_ATTEMPT, attempt)


def test_a_job_the_scheduler_refuses_explains_why_in_its_exit_spec(world, worker, submit):
    # 500 GPU tasks without gang allocation pass the submit check, but can never all be placed.
    text = job_yaml("too_big", roles={"main": {"instances": 500, "commands": ["true"]}},
                    extras={"gangAllocation": False})
    job = worker.wait_for_state(submit(world.a_member, text), "FAILED", timeout=10)

    status = assert_valid(JOB_DETAIL, detail(world.a_member, job))["jobStatus"]
    assert status["appExitCode"] == -200
    assert status["appExitSpec"]["phrase"] == "PodSpecPermanentError"
    assert "can never run here" in status["appExitDiagnostics"]
    assert status["appExitType"] == "Failed" and status["appExitMessages"]["launcher"] == status["appExitDiagnostics"]
