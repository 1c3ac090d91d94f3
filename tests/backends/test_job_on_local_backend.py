"""The engine-side pieces together: a job's pods built with OpenPAI's environment run
on the local backend, and their ends drive the completion and retry policies. The
driver below is the smallest loop that applies the decisions (the worker's reconciler
does the same with the database in between)."""

import time
from dataclasses import replace

from scheduler.backends import PodSpec, pod_labels, pod_name
from scheduler.exitcodes import LOG_TAIL_LINES
from scheduler.lifecycle import (
    CompletedTask,
    JobState,
    RetryState,
    TaskRoleProgress,
    completion_policy,
    decide_job_retry,
    evaluate_completion,
    task_exit,
)
from scheduler.podenv import JobInfo, PortAllocator, TaskAddress, TaskRoleInfo, requested_ports, task_environment

PRINT_ENV = (
    'echo "$PAI_CURRENT_TASK_ROLE_NAME/$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX of $PAI_JOB_NAME:'
    ' roles=$PAI_TASK_ROLE_LIST master=$PAI_HOST_IP_master_0:$PAI_PORT_LIST_master_0_http'
    ' gpus=$CUDA_VISIBLE_DEVICES"'
)


def run_attempt(backend, job, commands, attempt=0, timeout=10.0):
    """Run one attempt of ``job`` (``commands[task_role]`` is a shell script, or a
    function of the task index); return the outcome and the pods by task."""
    allocator = PortAllocator()
    addresses, pods = [], {}
    devices = iter(range(4))
    for tr in job.task_roles:
        for i in range(tr.instances):
            name = pod_name("job-1", tr.name, i, attempt, 0)
            ports = allocator.allocate("127.0.0.1", name, requested_ports(None))
            addresses.append(TaskAddress(tr.name, i, "127.0.0.1", ports))
            pods[(tr.name, i)] = name
    for tr in job.task_roles:
        for i in range(tr.instances):
            script = commands[tr.name]
            backend.create_pod(
                PodSpec(
                    name=pods[(tr.name, i)],
                    node="gpu-node-1",
                    commands=script(i) if callable(script) else script,
                    labels=pod_labels("job-1", tr.name, i, attempt, 0),
                    devices=(next(devices),) if tr.gpu else (),
                    env=task_environment(job, addresses, tr.name, i),
                    grace_seconds=0.5,
                )
            )
    progress = {
        tr.name: TaskRoleProgress(
            tr.name, tr.instances, completion_policy(tr.instances, tr.min_failed_instances, tr.min_succeeded_instances)
        )
        for tr in job.task_roles
    }
    completed = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for obs in backend.poll(None):
            key = (obs.labels["pai.taskrole"], int(obs.labels["pai.task-index"]))
            ended = task_exit(obs, backend.read_log(obs.name, tail_lines=LOG_TAIL_LINES))
            if ended is None or key in completed:
                continue
            completed.add(key)
            role = progress[key[0]]
            if ended.row.type == "succeeded":
                progress[key[0]] = replace(role, succeeded=role.succeeded + 1)
            else:
                progress[key[0]] = replace(role, failed=role.failed + 1)
            outcome = evaluate_completion(list(progress.values()), CompletedTask(key[0], key[1], ended.code, ended.row))
            if outcome.status != "running":
                for other in backend.list_pods({"pai.job": "job-1", "pai.attempt": str(attempt)}):
                    backend.delete_pod(other.name, uid=other.uid)
                return outcome, pods
        time.sleep(0.02)
    raise AssertionError("the attempt did not complete")


JOB = JobInfo(
    name="demo",
    user="alice",
    virtual_cluster="team_a",
    task_roles=(TaskRoleInfo("master", 1, gpu=1, cpu=2, memory_mb=1024), TaskRoleInfo("worker", 2, gpu=1, cpu=2, memory_mb=1024)),
)


def test_a_two_role_three_task_job_succeeds_with_openpai_variables_in_its_logs(backend):
    # minSucceededInstances -1: the attempt succeeds once every task did (by default
    # the first role whose tasks all succeed would end it).
    job = replace(JOB, task_roles=tuple(replace(tr, min_succeeded_instances=-1) for tr in JOB.task_roles))
    outcome, pods = run_attempt(backend, job, {"master": PRINT_ENV, "worker": PRINT_ENV})
    assert (outcome.status, outcome.exit_code, outcome.trigger) == ("succeeded", 0, "AllTasksCompleted")
    decision = decide_job_retry(outcome.exit_code, outcome.exit_row, 0, RetryState())
    assert decision.final_state == JobState.SUCCEEDED
    for (role, index), name in pods.items():
        log = backend.read_log(name)
        assert f"{role}/{index} of alice~demo: roles=master,worker master=127.0.0.1:" in log
        assert "gpus=" in log and "gpus=\n" not in log


def test_a_failing_worker_fails_the_attempt_and_the_others_are_stopped(backend):
    def worker(index):
        return "exit 1" if index == 1 else "sleep 30"

    outcome, pods = run_attempt(backend, JOB, {"master": "sleep 30", "worker": worker})
    assert (outcome.status, outcome.exit_code, outcome.task.task_role, outcome.task.index) == ("failed", 1, "worker", 1)
    assert outcome.exit_row.type == "unknown"
    deadline = time.monotonic() + 5
    while backend.list_pods({"pai.job": "job-1"}) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert backend.list_pods({"pai.job": "job-1"}) == []
    assert decide_job_retry(outcome.exit_code, outcome.exit_row, 0, RetryState()).final_state == JobState.FAILED
    retried = decide_job_retry(outcome.exit_code, outcome.exit_row, 1, RetryState())
    assert retried.retry and retried.counted


def test_a_task_killed_by_sigkill_is_retried_without_using_up_retries(backend):
    outcome, _ = run_attempt(backend, JOB, {"master": "kill -KILL $$", "worker": "sleep 30"})
    assert (outcome.status, outcome.exit_code) == ("failed", 137)
    decision = decide_job_retry(outcome.exit_code, outcome.exit_row, 0, RetryState())
    assert decision.retry and not decision.counted
    assert decision.state.retry_details() == {"user": 0, "platform": 1, "resource": 0}


def test_a_missing_command_fails_permanently_with_127(backend):
    outcome, _ = run_attempt(backend, JOB, {"master": "sleep 30", "worker": "definitely-not-a-command"})
    assert (outcome.status, outcome.exit_code, outcome.exit_row.phrase) == ("failed", 127, "ContainerCommandNotFound")
    decision = decide_job_retry(outcome.exit_code, outcome.exit_row, 5, RetryState())
    assert not decision.retry and decision.final_state == JobState.FAILED
