"""FrameworkController's completion policy, as OpenPAI documents it."""

import pytest

from scheduler.exitcodes import classify
from scheduler.lifecycle import (
    NEVER,
    CompletedTask,
    CompletionPolicy,
    TaskRoleProgress,
    completion_policy,
    evaluate_completion,
)


def done(role, index, code):
    return CompletedTask(role, index, code, classify(code))


def progress(name, instances, succeeded=0, failed=0, min_failed=None, min_succeeded=None):
    return TaskRoleProgress(name, instances, completion_policy(instances, min_failed, min_succeeded), succeeded, failed)


@pytest.mark.parametrize(
    ("instances", "min_failed", "min_succeeded", "expected"),
    [
        (3, None, None, CompletionPolicy(1, 3)),  # defaults: one failure fails, all must succeed
        (3, 0, 0, CompletionPolicy(1, 3)),  # OpenPAI treats 0 as unset
        (3, -1, None, CompletionPolicy(NEVER, 3)),
        (3, None, -1, CompletionPolicy(1, NEVER)),
        (4, 2, 1, CompletionPolicy(2, 1)),
    ],
)
def test_effective_policy_of_a_task_role(instances, min_failed, min_succeeded, expected):
    assert completion_policy(instances, min_failed, min_succeeded) == expected


def test_a_policy_below_minus_one_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="completion.minFailedInstances"):
        completion_policy(2, -2, None)
    with pytest.raises(ValueError, match="instances"):
        completion_policy(0)


# (task roles after the completion, the completed task) -> (status, exit code, trigger)
SCENARIOS = {
    "default: the first failure fails the attempt with its exit code": (
        [progress("worker", 3, succeeded=1, failed=1)],
        done("worker", 2, 1),
        ("failed", 1, "MinFailedTaskCountReached"),
    ),
    "default: a success alone keeps the attempt running": (
        [progress("worker", 3, succeeded=1)],
        done("worker", 0, 0),
        ("running", None, ""),
    ),
    "default: the last success of all instances succeeds": (
        [progress("worker", 3, succeeded=3)],
        done("worker", 1, 0),
        ("succeeded", 0, "MinSucceededTaskCountReached"),
    ),
    "minFailed 2: one failure is tolerated": (
        [progress("worker", 3, failed=1, min_failed=2)],
        done("worker", 0, 137),
        ("running", None, ""),
    ),
    "minFailed 2: the second failure fails with the second task's code": (
        [progress("worker", 3, failed=2, min_failed=2)],
        done("worker", 2, 127),
        ("failed", 127, "MinFailedTaskCountReached"),
    ),
    "minFailed -1: failures never fail; all completed succeeds": (
        [progress("worker", 2, succeeded=1, failed=1, min_failed=-1)],
        done("worker", 1, 1),
        ("succeeded", 0, "AllTasksCompleted"),
    ),
    "minFailed -1: a failure with tasks left keeps running": (
        [progress("worker", 3, failed=1, min_failed=-1)],
        done("worker", 1, 1),
        ("running", None, ""),
    ),
    "minSucceeded 1: the first success succeeds the attempt": (
        [progress("worker", 4, succeeded=1, min_succeeded=1)],
        done("worker", 3, 0),
        ("succeeded", 0, "MinSucceededTaskCountReached"),
    ),
    "minSucceeded -1: successes never end it before all tasks completed": (
        [progress("worker", 2, succeeded=1, min_succeeded=-1)],
        done("worker", 0, 0),
        ("running", None, ""),
    ),
    "minSucceeded -1: all completed succeeds": (
        [progress("worker", 2, succeeded=2, min_succeeded=-1)],
        done("worker", 0, 0),
        ("succeeded", 0, "AllTasksCompleted"),
    ),
    "parameter server: all workers succeeding ends the attempt while ps still runs": (
        [progress("ps", 1), progress("worker", 2, succeeded=2)],
        done("worker", 1, 0),
        ("succeeded", 0, "MinSucceededTaskCountReached"),
    ),
    "parameter server: a ps failure fails the attempt": (
        [progress("ps", 1, failed=1), progress("worker", 2, succeeded=1)],
        done("ps", 0, 139),
        ("failed", 139, "MinFailedTaskCountReached"),
    ),
    "two roles: one role's success count does not end the attempt while another runs": (
        [progress("a", 1, succeeded=1, min_succeeded=-1), progress("b", 1)],
        done("a", 0, 0),
        ("running", None, ""),
    ),
    "only the completed task's role is evaluated: another role's failures were tolerated": (
        [progress("a", 2, failed=2, min_failed=-1), progress("b", 1, succeeded=1)],
        done("b", 0, 0),
        ("succeeded", 0, "MinSucceededTaskCountReached"),
    ),
    "a transient failure counts as a failure for the policy": (
        [progress("worker", 2, failed=1)],
        done("worker", 0, -1001),
        ("failed", -1001, "MinFailedTaskCountReached"),
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_completion_policy(scenario):
    roles, task, (status, code, trigger) = SCENARIOS[scenario]
    outcome = evaluate_completion(roles, task)
    assert (outcome.status, outcome.exit_code, outcome.trigger) == (status, code, trigger)
    if status == "running":
        assert outcome.task is None and outcome.exit_row is None
    else:
        assert outcome.task == task
        assert outcome.exit_row.code == (task.exit_row.code if status == "failed" else 0)


def test_the_failed_attempt_carries_the_triggering_tasks_row():
    outcome = evaluate_completion([progress("w", 1, failed=1)], done("w", 0, 1))
    assert outcome.exit_row.code == 256 and outcome.exit_row.type == "unknown"


def test_inconsistent_progress_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        evaluate_completion([progress("w", 1, succeeded=1)], done("x", 0, 0))
    with pytest.raises(ValueError, match="3 tasks completed of 2"):
        evaluate_completion([progress("w", 2, succeeded=2, failed=1)], done("w", 0, 0))
