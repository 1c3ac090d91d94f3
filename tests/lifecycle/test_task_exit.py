"""How a pod observation becomes a task attempt's completion code and exit row."""

import pytest

from scheduler.backends import PodObservation
from scheduler.lifecycle import task_exit


def observed(phase="Failed", **kwargs):
    return PodObservation(name="p", uid="u", phase=phase, resource_version="1", **kwargs)


@pytest.mark.parametrize(
    ("observation", "log_tail", "code", "row"),
    [
        (observed("Succeeded", exit_code=0, container_reason="Completed"), "", 0, 0),
        (observed(exit_code=1, container_reason="Error"), "", 1, 256),
        (observed(exit_code=3), "", 3, 256),
        (observed(exit_code=-7), "", -7, -8000),
        (observed(exit_code=127), "", 127, 127),
        (observed(exit_code=137, signal=9), "", 137, 137),
        (observed(signal=15), "", 143, 143),
        (observed(exit_code=137, container_reason="OOMKilled"), "", -1200, -1200),
        (observed(reason="NodeLost"), "", -1001, -1001),
        (observed(reason="Evicted"), "", -1000, -1000),
        (observed(exit_code=1), "RuntimeError: CUDA out of memory.", 226, 226),
        (observed(exit_code=255), "", 255, 255),
        (observed(), "", 255, 255),
        (observed(container_reason="ErrImagePull"), "", 254, 254),
        (observed("Running", deleted=True), "", -101, -101),
        (observed("Pending", deleted=True), "", -101, -101),
    ],
)
def test_task_exit(observation, log_tail, code, row):
    result = task_exit(observation, log_tail)
    assert (result.code, result.row.code) == (code, row)


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown"])
def test_a_pod_that_has_not_ended_has_no_exit(phase):
    assert task_exit(observed(phase)) is None
    assert task_exit(observed(phase, deletion_requested=True)) is None
