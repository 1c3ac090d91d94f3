"""Retry policy by exit class, retry accounting, and the user-visible state mapping."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.exitcodes import classify, exit_spec
from scheduler.lifecycle import JobState, RetryState, SubState, decide_job_retry, decide_task_retry, user_state


def decide(code, job_retry_count=0, state=RetryState(), **kwargs):
    return decide_job_retry(code, classify(code), job_retry_count, state, **kwargs)


@pytest.mark.parametrize(
    ("code", "retry", "counted", "causer"),
    [
        (137, True, False, "platform"),  # SIGKILL: transient, free
        (-1001, True, False, "platform"),  # node lost
        (-1003, True, False, "resource"),  # preempted
        (-1000, True, False, "resource"),  # evicted
        (-101, True, False, "platform"),  # deleted by someone else
        (-120, True, False, "platform"),  # transient creation error
        (223, True, False, "platform"),  # ECC error
    ],
)
def test_transient_failures_are_always_retried_and_not_counted(code, retry, counted, causer):
    decision = decide(code, job_retry_count=0, state=RetryState(retries=5, counted=0))
    assert (decision.retry, decision.counted, decision.final_state) == (retry, counted, None)
    assert decision.state.retries == 6 and decision.state.counted == 0
    assert getattr(decision.state, causer) == 1


@pytest.mark.parametrize("code", [127, 126, -1200, -200, -1004, 139, 226, 254])
def test_permanent_failures_are_never_retried(code):
    decision = decide(code, job_retry_count=10)
    assert not decision.retry
    assert decision.final_state == JobState.FAILED
    assert decision.exit_code == code
    assert decision.state == RetryState()


def test_unknown_failures_are_retried_while_job_retry_count_allows_and_counted():
    state = RetryState()
    for expected_counted in (1, 2):
        decision = decide(1, job_retry_count=2, state=state)
        assert decision.retry and decision.counted
        state = decision.state
        assert state.counted == expected_counted
    final = decide(1, job_retry_count=2, state=state)
    assert not final.retry and final.final_state == JobState.FAILED
    assert final.state == RetryState(retries=2, counted=2, user=2)
    assert final.state.retry_details() == {"user": 2, "platform": 0, "resource": 0}


def test_transient_retries_do_not_use_up_job_retry_count():
    state = RetryState()
    for _ in range(3):
        state = decide(137, job_retry_count=1, state=state).state
    decision = decide(134, job_retry_count=1, state=state)  # SIGABRT: unknown
    assert decision.retry and decision.counted
    assert decision.state == RetryState(retries=4, counted=1, user=1, platform=3)


def test_unknown_failure_without_retries_fails():
    assert decide(255, job_retry_count=0).final_state == JobState.FAILED


def test_a_stop_ends_the_job_stopped_with_the_stop_code_whatever_the_attempt_did():
    for code in (0, 1, 137, -220):
        decision = decide(code, job_retry_count=3, stop_requested=True)
        assert (decision.retry, decision.final_state, decision.exit_code) == (False, JobState.STOPPED, -210)
    assert decide(-210).final_state == JobState.STOPPED


def test_a_stop_for_low_gpu_use_keeps_its_own_code_and_is_never_retried():
    for retry_count in (0, 3, -1, -2):
        for stop_requested in (False, True):
            decision = decide(-230, job_retry_count=retry_count, stop_requested=stop_requested)
            assert (decision.retry, decision.final_state, decision.exit_code) == (False, JobState.STOPPED, -230)
    assert user_state(SubState.ATTEMPT_DELETION_PENDING, -230) == JobState.STOPPING
    assert user_state(SubState.COMPLETED, -230) == JobState.STOPPED


def test_success_ends_the_job_succeeded():
    decision = decide(0, job_retry_count=3)
    assert (decision.retry, decision.final_state, decision.exit_code) == (False, JobState.SUCCEEDED, 0)


def test_tasks_are_not_retried_alone_under_gang_allocation():
    decision = decide_task_retry(1, classify(1), 5, RetryState(), gang_allocation=True)
    assert not decision.retry and decision.final_state == JobState.FAILED
    decision = decide_task_retry(137, classify(137), 5, RetryState(), gang_allocation=True)
    assert not decision.retry


def test_without_gang_allocation_a_task_follows_the_policy_with_task_retry_count():
    decision = decide_task_retry(1, classify(1), 1, RetryState(), gang_allocation=False)
    assert decision.retry and decision.counted
    again = decide_task_retry(1, classify(1), 1, decision.state, gang_allocation=False)
    assert not again.retry and again.final_state == JobState.FAILED
    assert decide_task_retry(0, classify(0), 1, RetryState(), gang_allocation=False).final_state == JobState.SUCCEEDED


# -- FrameworkController's negative retry counts (OpenPAI passes jobRetryCount through) ---


def test_job_retry_count_minus_one_retries_every_unknown_failure_without_limit():
    state = RetryState()
    for _ in range(50):
        decision = decide(1, job_retry_count=-1, state=state)
        assert decision.retry and decision.counted
        state = decision.state
    assert state.counted == 50
    # The fancy policy still applies: permanent failures end the job, successes too.
    assert decide(127, job_retry_count=-1, state=state).final_state == JobState.FAILED
    assert decide(0, job_retry_count=-1, state=state).final_state == JobState.SUCCEEDED


def test_job_retry_count_minus_two_retries_whatever_the_end_until_stopped():
    state = RetryState()
    for code in (0, 127, 1, 137, 0):
        decision = decide(code, job_retry_count=-2, state=state)
        assert decision.retry and decision.counted, code
        state = decision.state
    assert state.retries == state.counted == 5
    assert decide(0, job_retry_count=-2, state=state, stop_requested=True).final_state == JobState.STOPPED
    # An invalid pod spec can never run: FrameworkController does not retry it.
    assert decide(-200, job_retry_count=-2, state=state).final_state == JobState.FAILED


def test_task_retry_count_minus_two_retries_a_task_even_after_success():
    decision = decide_task_retry(0, classify(0), -2, RetryState(), gang_allocation=False)
    assert decision.retry and decision.counted
    assert decide_task_retry(0, classify(0), -2, RetryState(), gang_allocation=True).final_state == JobState.SUCCEEDED


# -- user-visible states ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sub_state", "code", "state"),
    [
        ("AttemptCreationPending", None, "WAITING"),
        ("AttemptCreationRequested", None, "WAITING"),
        ("AttemptPreparing", None, "WAITING"),
        ("AttemptRunning", None, "RUNNING"),
        ("AttemptDeletionPending", -210, "STOPPING"),
        ("AttemptDeletionRequested", -220, "STOPPING"),
        ("AttemptDeleting", -210, "STOPPING"),
        ("AttemptDeletionPending", 1, "RUNNING"),
        ("AttemptDeleting", 137, "RUNNING"),
        ("AttemptDeletionRequested", None, "RUNNING"),
        ("AttemptCompleted", -1001, "RUNNING"),
        ("AttemptCompleted", -210, "STOPPING"),
        ("Completed", 0, "SUCCEEDED"),
        ("Completed", -210, "STOPPED"),
        ("Completed", -220, "STOPPED"),
        ("Completed", 1, "FAILED"),
        ("Completed", 127, "FAILED"),
        ("Completed", None, "UNKNOWN"),
        ("SomethingElse", 0, "UNKNOWN"),
    ],
)
def test_state_mapping(sub_state, code, state):
    assert user_state(sub_state, code) == JobState(state)


codes = st.one_of(st.none(), st.integers(-100000, 100000), st.sampled_from([r.code for r in exit_spec().rows]))


@settings(max_examples=300, deadline=None)
@given(sub_state=st.one_of(st.sampled_from(list(SubState)), st.text(max_size=30)), code=codes)
def test_the_state_mapping_is_total(sub_state, code):
    assert user_state(sub_state, code) in set(JobState)


@settings(max_examples=300, deadline=None)
@given(sub_state=st.sampled_from(list(SubState)), code=st.integers(-100000, 100000))
def test_every_known_sub_state_with_a_code_maps_to_a_real_state(sub_state, code):
    assert user_state(sub_state, code) != JobState.UNKNOWN


@settings(max_examples=200, deadline=None)
@given(
    failures=st.lists(st.sampled_from([r.code for r in exit_spec().rows if r.code != 0]), max_size=25),
    job_retry_count=st.integers(0, 5),
)
def test_retry_accounting_invariants_over_any_sequence_of_failures(failures, job_retry_count):
    state = RetryState()
    for code in failures:
        decision = decide(code, job_retry_count=job_retry_count, state=state)
        row = classify(code)
        if row.type == "transient":
            assert decision.retry and not decision.counted
        if row.type == "permanent":
            assert not decision.retry
        state = decision.state
        assert state.counted <= job_retry_count
        assert state.user + state.platform + state.resource == state.retries
        if not decision.retry:
            assert decision.final_state in {JobState.FAILED, JobState.STOPPED}
            break
