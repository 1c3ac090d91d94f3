"""Job lifecycle policy with FrameworkController's semantics.

Pure decisions, data in and data out; the reconciler in the worker applies them:

- :func:`task_exit`: how a task attempt's pod ended (code and exit spec row);
- :func:`completion_policy` and :func:`evaluate_completion`: when a task completes,
  does its attempt succeed, fail, or keep running?
- :func:`decide_job_retry`: after an attempt ends, run another one or end the job?
  (:func:`decide_task_retry` is the same question for one task when gang allocation is
  off.)
- :func:`user_state`: the OpenPAI state clients see for a FrameworkController state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from .backends.base import PodObservation
from .exitcodes import (
    ATTEMPT_COMPLETION,
    POD_CREATION_PERMANENT_ERROR,
    POD_EXTERNAL_DELETED,
    STOP_REQUESTED,
    STOPPED_FOR_LOW_GPU_USE,
    SUCCEEDED,
    ExitSpecRow,
    classify,
    row,
)

NEVER = -1
"""``minFailedInstances: -1`` / ``minSucceededInstances: -1``: this count never ends the
attempt (with -1 for successes, all tasks must complete, so "all")."""


class SubState(StrEnum):
    """FrameworkController's framework states: the job's ``subState``."""

    ATTEMPT_CREATION_PENDING = "AttemptCreationPending"
    ATTEMPT_CREATION_REQUESTED = "AttemptCreationRequested"
    ATTEMPT_PREPARING = "AttemptPreparing"
    ATTEMPT_RUNNING = "AttemptRunning"
    ATTEMPT_DELETION_PENDING = "AttemptDeletionPending"
    ATTEMPT_DELETION_REQUESTED = "AttemptDeletionRequested"
    ATTEMPT_DELETING = "AttemptDeleting"
    ATTEMPT_COMPLETED = "AttemptCompleted"
    COMPLETED = "Completed"


class JobState(StrEnum):
    """OpenPAI's user-visible job states."""

    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


_WAITING_SUBSTATES = {
    SubState.ATTEMPT_CREATION_PENDING,
    SubState.ATTEMPT_CREATION_REQUESTED,
    SubState.ATTEMPT_PREPARING,
}
# Deleting an attempt's pods, or between two attempts.
_ENDING_SUBSTATES = {
    SubState.ATTEMPT_DELETION_PENDING,
    SubState.ATTEMPT_DELETION_REQUESTED,
    SubState.ATTEMPT_DELETING,
    SubState.ATTEMPT_COMPLETED,
}
_STOP_CODES = {STOP_REQUESTED, ATTEMPT_COMPLETION, STOPPED_FOR_LOW_GPU_USE}
# Stops that keep their own code as the job's exit code (a user's stop ends with -210).
STOPS_WITH_OWN_CODE = frozenset({STOPPED_FOR_LOW_GPU_USE})


def user_state(sub_state: str, exit_code: int | None) -> JobState:
    """The OpenPAI state for a FrameworkController state and the attempt's exit code.

    Creation pending / requested / preparing → WAITING; running → RUNNING; deletion
    states and between attempts → STOPPING when a stop or completion code (−210, −220,
    −230) ended the attempt, else RUNNING; completed → SUCCEEDED (0), STOPPED (−210/−220/−230),
    FAILED (any other code). Anything else (an unknown state, or completed without a
    code) → UNKNOWN.
    """
    if sub_state in _WAITING_SUBSTATES:
        return JobState.WAITING
    if sub_state == SubState.ATTEMPT_RUNNING:
        return JobState.RUNNING
    if sub_state in _ENDING_SUBSTATES:
        return JobState.STOPPING if exit_code in _STOP_CODES else JobState.RUNNING
    if sub_state == SubState.COMPLETED:
        if exit_code is None:
            return JobState.UNKNOWN
        if exit_code == SUCCEEDED:
            return JobState.SUCCEEDED
        return JobState.STOPPED if exit_code in _STOP_CODES else JobState.FAILED
    return JobState.UNKNOWN


# -- how a task attempt ended -------------------------------------------------------------


@dataclass(frozen=True)
class TaskExit:
    """A task attempt's completion: the code to record and its exit spec row."""

    code: int
    row: ExitSpecRow


def task_exit(observation: PodObservation, log_tail: str = "") -> TaskExit | None:
    """How the pod of a task attempt ended, or ``None`` while it has not.

    A terminal pod is classified from its exit code, signal, reasons and ``log_tail``
    (e.g. ``backend.read_log(name, tail_lines=exitcodes.LOG_TAIL_LINES)``). The code to
    record is the matched row's (−1001 node lost, −1200 for an OOM kill that exited 137,
    226 for a CUDA out-of-memory that exited 1, as OpenPAI's runtime reported it),
    except for the fallback rows (256, -8000), where the container's own code stays (an
    unknown ``3`` stays ``3``). A pod that is gone
    without a terminal phase vanished: −101, deleted by someone else (transient). Pods
    pai deleted itself end with the code of the reason pai had (−210 stop, −220
    completion, −1003 preemption): the reconciler records that instead.
    """
    if not observation.terminal:
        if observation.deleted:
            return TaskExit(POD_EXTERNAL_DELETED, row(POD_EXTERNAL_DELETED))
        return None
    exit_row = classify(
        observation.exit_code, observation.signal, observation.reason, observation.container_reason, log_tail
    )
    if not exit_row.is_fallback:
        return TaskExit(exit_row.code, exit_row)
    code = observation.exit_code
    if code is None:
        code = 128 + observation.signal
    return TaskExit(code, exit_row)


# -- completion policy -------------------------------------------------------------------


@dataclass(frozen=True)
class CompletionPolicy:
    """A task role's effective ``minFailedInstances`` / ``minSucceededInstances``
    (:data:`NEVER` for -1)."""

    min_failed: int
    min_succeeded: int


def completion_policy(
    instances: int, min_failed_instances: int | None = None, min_succeeded_instances: int | None = None
) -> CompletionPolicy:
    """The effective policy of a task role from its ``completion`` fields.

    Defaults, as OpenPAI passes them to FrameworkController: one failure fails the
    attempt (``minFailedInstances`` 1) and all instances must succeed
    (``minSucceededInstances`` = instances). ``null`` and 0 take the default (OpenPAI
    treats 0 as unset); -1 means never.
    """
    if instances < 1:
        raise ValueError("instances: must be ≥ 1")
    for field, value in (("minFailedInstances", min_failed_instances), ("minSucceededInstances", min_succeeded_instances)):
        if value is not None and value < NEVER:
            raise ValueError(f"completion.{field}: must be -1 or ≥ 0")
    return CompletionPolicy(
        min_failed=min_failed_instances or 1,
        min_succeeded=min_succeeded_instances or instances,
    )


@dataclass(frozen=True)
class TaskRoleProgress:
    """How a task role's tasks stand in the current attempt (completed tasks only count
    once they are finally completed, after their own retries)."""

    name: str
    instances: int
    policy: CompletionPolicy
    succeeded: int = 0
    failed: int = 0

    @property
    def completed(self) -> int:
        return self.succeeded + self.failed


@dataclass(frozen=True)
class CompletedTask:
    """The task whose completion is being evaluated, with its classified exit."""

    task_role: str
    index: int
    exit_code: int
    exit_row: ExitSpecRow

    @property
    def succeeded(self) -> bool:
        return self.exit_row.type == "succeeded"


AttemptStatus = Literal["running", "succeeded", "failed"]


@dataclass(frozen=True)
class AttemptOutcome:
    """The attempt's fate after a task completed.

    ``trigger`` is why it ended: ``MinFailedTaskCountReached``,
    ``MinSucceededTaskCountReached`` or ``AllTasksCompleted`` (empty while running);
    ``exit_code``/``exit_row`` are the attempt's (the triggering task's on failure, 0 on
    success); ``task`` is the task that triggered it; ``message`` says all that in words.
    """

    status: AttemptStatus
    exit_code: int | None = None
    exit_row: ExitSpecRow | None = None
    trigger: str = ""
    task: CompletedTask | None = None
    message: str = ""  # the trigger in words (OpenPAI's appExitTriggerMessage)


def evaluate_completion(roles: Sequence[TaskRoleProgress], task: CompletedTask) -> AttemptOutcome:
    """FrameworkController's completion policy, evaluated when ``task`` completes.

    ``roles`` are every task role of the attempt, with counts that already include
    ``task``. In order: the task failed and its role's failed count reached
    ``min_failed`` → the attempt fails with the task's exit code; the task succeeded and
    its role's succeeded count reached ``min_succeeded`` → the attempt succeeds; every
    task of every role completed → the attempt succeeds; otherwise it keeps running.
    Call it only while the attempt runs: tasks stopped because the attempt ended
    (−220) or the job was stopped (−210) are not evaluated.
    """
    by_name = {r.name: r for r in roles}
    if task.task_role not in by_name:
        raise ValueError(f"task role {task.task_role!r} is not one of the attempt's")
    role = by_name[task.task_role]
    if role.completed > role.instances:
        raise ValueError(f"task role {role.name}: {role.completed} tasks completed of {role.instances}")
    name = f"{task.task_role}[{task.index}]"
    if not task.succeeded:
        if role.policy.min_failed != NEVER and role.failed >= role.policy.min_failed:
            message = (f"MinFailedTaskCount {role.policy.min_failed} has been reached in task role {role.name}: "
                       f"task {name} failed with exit code {task.exit_code}")
            return AttemptOutcome("failed", task.exit_code, task.exit_row, "MinFailedTaskCountReached", task, message)
    elif role.policy.min_succeeded != NEVER and role.succeeded >= role.policy.min_succeeded:
        message = (f"MinSucceededTaskCount {role.policy.min_succeeded} has been reached in task role {role.name}: "
                   f"task {name} succeeded")
        return _succeeded("MinSucceededTaskCountReached", task, message)
    if all(r.completed >= r.instances for r in roles):
        return _succeeded("AllTasksCompleted", task, "All tasks are completed")
    return AttemptOutcome("running")


def _succeeded(trigger: str, task: CompletedTask, message: str) -> AttemptOutcome:
    return AttemptOutcome("succeeded", SUCCEEDED, row(SUCCEEDED), trigger, task, message)


# -- retry policy ------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryState:
    """A job's (or task's) retry record: ``retries`` counts every retry, ``counted``
    those that used up ``jobRetryCount``; ``user``/``platform``/``resource`` split
    ``retries`` by the causer of the failure that was retried (OpenPAI's retryDetails).
    """

    retries: int = 0
    counted: int = 0
    user: int = 0
    platform: int = 0
    resource: int = 0

    def retry_details(self) -> dict[str, int]:
        return {"user": self.user, "platform": self.platform, "resource": self.resource}


@dataclass(frozen=True)
class RetryDecision:
    """``retry``: start another attempt; else the job ends in ``final_state`` with
    ``exit_code``. ``counted``: the retry uses up one of ``jobRetryCount``. ``state``
    is the retry record to store (unchanged when not retrying)."""

    retry: bool
    counted: bool
    state: RetryState
    final_state: JobState | None
    exit_code: int
    exit_row: ExitSpecRow


RETRY_FAILURES_WITHOUT_LIMIT = -1
RETRY_ALWAYS = -2
"""FrameworkController's special ``maxRetryCount`` values, as OpenPAI passes ``jobRetryCount``
and ``taskRetryCount``: -1 retries every failure without limit, -2 retries whatever the end
(a success too: the job runs until it is stopped)."""


def decide_job_retry(
    exit_code: int, exit_row: ExitSpecRow, job_retry_count: int, state: RetryState, *, stop_requested: bool = False
) -> RetryDecision:
    """What to do after an attempt completed with ``exit_code`` (classified ``exit_row``).

    FrameworkController's RetryPolicySpec, as OpenPAI configures it for a job: the fancy
    policy unless ``jobRetryCount`` is -2 (:data:`RETRY_ALWAYS`), then the normal policy.
    See :func:`decide_retry`.
    """
    return decide_retry(
        exit_code, exit_row, job_retry_count, state, stop_requested=stop_requested,
        fancy=job_retry_count != RETRY_ALWAYS,
    )


def decide_retry(
    exit_code: int,
    exit_row: ExitSpecRow,
    max_retry_count: int,
    state: RetryState,
    *,
    stop_requested: bool = False,
    fancy: bool = True,
) -> RetryDecision:
    """FrameworkController's RetryPolicySpec for one completion.

    Never retried: a stop (the end is STOPPED with −210, whatever the attempt's code, or with
    the stop's own code when pai stopped the job itself, −230 for low GPU use) and an
    invalid pod spec (−200). With the fancy policy, transient failures are always retried
    and not counted, permanent ones never. Then the normal policy: retried and counted when
    ``max_retry_count`` is -2 (whatever the end, a success too), or on a failure when it is
    -1 or more than the retries counted so far. Otherwise the end is final: SUCCEEDED for a
    success, FAILED for a failure.
    """
    if exit_code in STOPS_WITH_OWN_CODE:
        return RetryDecision(False, False, state, JobState.STOPPED, exit_code, row(exit_code))
    if stop_requested or exit_code == STOP_REQUESTED:
        return RetryDecision(False, False, state, JobState.STOPPED, STOP_REQUESTED, row(STOP_REQUESTED))
    succeeded = exit_row.type == "succeeded"
    final = JobState.SUCCEEDED if succeeded else JobState.FAILED
    if exit_code == POD_CREATION_PERMANENT_ERROR:
        return RetryDecision(False, False, state, final, exit_code, exit_row)
    if fancy and exit_row.type == "transient":
        return RetryDecision(True, False, _retried(state, exit_row, counted=False), None, exit_code, exit_row)
    if fancy and exit_row.type == "permanent":
        return RetryDecision(False, False, state, final, exit_code, exit_row)
    if max_retry_count == RETRY_ALWAYS or (
        not succeeded and (max_retry_count == RETRY_FAILURES_WITHOUT_LIMIT or state.counted < max_retry_count)
    ):
        return RetryDecision(True, True, _retried(state, exit_row, counted=True), None, exit_code, exit_row)
    return RetryDecision(False, False, state, final, exit_code, exit_row)


def decide_task_retry(
    exit_code: int, exit_row: ExitSpecRow, task_retry_count: int, state: RetryState, *, gang_allocation: bool = True
) -> RetryDecision:
    """Whether a completed task attempt gets another task attempt inside the same attempt.

    As OpenPAI configures FrameworkController: with gang allocation (the default) a task
    is never retried on its own (the whole attempt is, by :func:`decide_job_retry`);
    without it, each task has the fancy policy with ``taskRetryCount``. When the decision
    is not to retry, the task is completed (``final_state`` FAILED or SUCCEEDED) and
    :func:`evaluate_completion` takes over. The caller does not ask while the attempt is
    ending (FrameworkController never retries a task then).
    """
    if gang_allocation:
        final = JobState.SUCCEEDED if exit_row.type == "succeeded" else JobState.FAILED
        return RetryDecision(False, False, state, final, exit_code, exit_row)
    return decide_retry(exit_code, exit_row, task_retry_count, state)


def _retried(state: RetryState, exit_row: ExitSpecRow, *, counted: bool) -> RetryState:
    return replace(
        state,
        retries=state.retries + 1,
        counted=state.counted + (1 if counted else 0),
        **{exit_row.causer: getattr(state, exit_row.causer) + 1},
    )
