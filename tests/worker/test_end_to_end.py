"""Jobs through the API, scheduled and run for real on the local backend."""

from rest_framework.test import APIClient

from apps.jobs.models import JobAttempt, TaskAttempt

from tests.jobs.openpai_swagger import JOB_DETAIL, assert_valid

from .conftest import job_yaml


def api_get(user, path):
    client = APIClient()
    client.force_authenticate(user)
    return client.get(path)


def test_a_two_role_job_succeeds_with_openpai_environment(world, worker, submit):
    text = job_yaml(
        "distributed",
        roles={
            "ps": {"instances": 1, "gpu": 1, "commands": ["env | grep ^PAI_ | sort", "echo ps-done"]},
            "worker": {"instances": 2, "gpu": 2, "commands": ["echo visible=$CUDA_VISIBLE_DEVICES", "env | grep ^PAI_ | sort"]},
        },
    )
    job = submit(world.a_member, text)
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED", job.attempts.first().exit_diagnostics
    assert job.app_exit_code == 0
    assert job.sub_state == "Completed"
    attempt = JobAttempt.objects.get(job=job)
    assert attempt.launched_at is not None and attempt.completed_at is not None
    logs = {ta.task.task_role + str(ta.task.index): worker.controller.backend.read_log(ta.pod_name)
            for ta in TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task")}
    assert len(logs) == 3
    ps_log = logs["ps0"]
    assert "PAI_JOB_NAME=a_member~distributed" in ps_log
    assert "PAI_TASK_ROLE_COUNT=2" in ps_log
    assert "PAI_TASK_ROLE_LIST=ps,worker" in ps_log
    assert "PAI_TASK_ROLE_TASK_COUNT_worker=2" in ps_log
    assert "PAI_CURRENT_TASK_ROLE_NAME=ps" in ps_log
    assert "PAI_HOST_IP_worker_1=127.0.0.1" in ps_log
    assert "PAI_VIRTUAL_CLUSTER=team_a" in ps_log
    assert "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX=1" in logs["worker1"]
    assert "visible=" in logs["worker0"] and len(logs["worker0"].split("visible=")[1].split()[0].split(",")) == 2
    # The API shows the job and serves its log.
    detail = api_get(world.a_member, "/api/v2/jobs/a_member~distributed").json()
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert {ts["taskState"] for tr in detail["taskRoles"].values() for ts in tr["taskStatuses"]} == {"SUCCEEDED"}


def test_a_failing_task_fails_the_job_and_stops_the_others(world, worker, submit):
    text = job_yaml(
        "fails",
        roles={
            "bad": {"gpu": 1, "commands": ["sleep 0.5", "exit 1"], "completion": {"minFailedInstances": 1}},
            "slow": {"instances": 2, "gpu": 1, "commands": ["sleep 60"]},
        },
    )
    job = submit(world.a_member, text)
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED", "STOPPED")
    assert job.state == "FAILED"
    assert job.app_exit_code == 1
    attempt = job.attempts.get()
    assert attempt.trigger_task_role == "bad"
    codes = sorted(
        (ta.task.task_role, ta.exit_code)
        for ta in TaskAttempt.objects.filter(task__job_attempt=attempt).select_related("task")
    )
    assert codes == [("bad", 1), ("slow", -220), ("slow", -220)]
    # No process of the job is left running.
    assert all(pod.phase in ("Succeeded", "Failed") for pod in worker.controller.backend.list_pods())


def test_command_not_found_fails_permanently_without_retry(world, worker, submit):
    job = submit(world.a_member, job_yaml("nocmd", retry=3, roles={"main": {"commands": ["no-such-command-here"]}}))
    job = worker.wait_for_state(job, "FAILED", "SUCCEEDED")
    assert job.state == "FAILED"
    assert job.app_exit_code == 127
    assert job.retries == 0
    assert job.attempts.count() == 1
    attempt = job.attempts.get()
    assert attempt.exit_spec_code == 127
    assert "command not found" in attempt.exit_diagnostics.lower()


def test_sigkill_is_retried_as_transient_without_using_up_retries(world, worker, submit):
    # The first attempt kills itself with SIGKILL; the retry finds the marker (on the
    # team's default storage, which outlives attempts) and succeeds.
    marker = '"$PAI_STORAGE_TEAM_A_DATA/killed-once"'
    script = f"if [ ! -f {marker} ]; then touch {marker}; kill -9 $$; fi; echo second"
    job = submit(world.a_member, job_yaml("killed", retry=0, roles={"main": {"commands": [script]}}))
    job = worker.wait_for_state(job, "SUCCEEDED", "FAILED")
    assert job.state == "SUCCEEDED", [a.exit_diagnostics for a in job.attempts.all()]
    assert job.retries == 1
    assert job.retry_details == {"user": 0, "platform": 1, "resource": 0}
    assert job.attempts.count() == 2
    first = job.attempts.order_by("index").first()
    assert first.exit_code == 137
    # As OpenPAI's clients read the retried job: the retry, and the killed attempt by id.
    retried = assert_valid(JOB_DETAIL, api_get(world.a_member, "/api/v2/jobs/a_member~killed").json())["jobStatus"]
    assert (retried["state"], retried["retries"], retried["attemptId"]) == ("SUCCEEDED", 1, 1)
    assert retried["retryDetails"] == {"user": 0, "platform": 1, "resource": 0}
    killed = api_get(world.a_member, "/api/v2/jobs/a_member~killed/attempts/0").json()
    status = assert_valid(JOB_DETAIL, killed)["jobStatus"]
    assert (status["attemptState"], status["appExitCode"], status["appExitSpec"]["phrase"]) == (
        "FAILED", 137, "ContainerSigKillReceived")


def test_user_stop_ends_stopped(world, worker, submit):
    job = submit(world.a_member, job_yaml("long", roles={"main": {"commands": ["sleep 120"]}}))
    job = worker.wait_for_state(job, "RUNNING")
    client = APIClient()
    client.force_authenticate(world.a_member)
    response = client.put("/api/v2/jobs/a_member~long/executionType", {"value": "STOP"}, format="json")
    assert response.status_code in (200, 202), response.content
    job = worker.wait_for_state(job, "STOPPED")
    assert job.app_exit_code == -210
    assert all(ta.exit_code == -210 for ta in TaskAttempt.objects.filter(task__job_attempt__job=job))


def test_a_gang_that_does_not_fit_waits_with_a_reason_then_starts(world, worker, submit):
    big = submit(world.a_member, job_yaml("big", roles={"main": {"instances": 2, "gpu": 8, "commands": ["sleep 2"]}}))
    worker.wait_for_state(big, "RUNNING")
    blocked = submit(world.a_member, job_yaml("next", roles={"main": {"gpu": 8, "commands": ["echo ok"]}}))
    worker.cycle()
    blocked.refresh_from_db()
    assert blocked.state == "WAITING"
    assert blocked.wait_reason and "team_a" in blocked.wait_reason
    assert blocked.queue_position == 1
    detail = api_get(world.a_member, "/api/v2/jobs/a_member~next").json()
    assert detail["jobStatus"]["state"] == "WAITING"
    blocked = worker.wait_for_state(blocked, "SUCCEEDED", timeout=40)
    assert blocked.wait_reason == ""


def test_a_failed_jobs_detail_explains_the_exit_with_its_spec_row_and_log(world, worker, submit):
    job = submit(world.a_member, job_yaml("explained", roles={"main": {"commands": ["echo about to fail", "no-such-tool --now"]}}))
    worker.wait_for_state(job, "FAILED")
    status = api_get(world.a_member, "/api/v2/jobs/a_member~explained").json()["jobStatus"]
    assert status["appExitCode"] == 127
    assert status["appExitSpec"]["phrase"] and status["appExitSpec"]["type"] == "permanent"
    assert status["appExitSpec"]["solution"]
    assert status["appExitTriggerTaskRoleName"] == "main"
    assert "about to fail" in status["appExitDiagnostics"]  # the tail of the failing task's log
