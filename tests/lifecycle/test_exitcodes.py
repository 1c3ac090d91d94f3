"""The exit spec classifies every row of the exit spec's table from the inputs that
produce it, with the documented precedence."""

import pytest

from scheduler.exitcodes import ExitSpec, classify, exit_spec, row

# The exit spec (scheduler/exitspec.yaml): code -> type.
SPEC_TABLE = {
    0: "succeeded",
    -101: "transient",
    -111: "transient",
    -120: "transient",
    -200: "permanent",
    -210: "permanent",
    -220: "permanent",
    -230: "permanent",  # pai's own: the idle-GPU rule's stop
    -1000: "transient",
    -1001: "transient",
    -1002: "transient",
    -1003: "transient",
    -1004: "permanent",
    -1200: "permanent",
    -1205: "transient",
    126: "permanent",
    127: "permanent",
    130: "transient",
    143: "transient",
    137: "transient",
    132: "permanent",
    135: "permanent",
    136: "permanent",
    139: "permanent",
    141: "permanent",
    134: "unknown",
    221: "permanent",
    223: "transient",
    226: "permanent",
    254: "permanent",
    255: "unknown",
    256: "unknown",
    -8000: "unknown",
}

# How each row arises: keyword arguments of classify() -> expected code.
CASES = [
    ({"exit_code": 0}, 0),
    ({"exit_code": -101}, -101),
    ({"exit_code": -111}, -111),
    ({"exit_code": -120}, -120),
    ({"exit_code": -200}, -200),
    ({"exit_code": -230}, -230),
    ({"exit_code": -210}, -210),
    ({"exit_code": -220}, -220),
    ({"exit_code": None, "pod_reason": "Evicted"}, -1000),
    ({"exit_code": None, "pod_reason": "NodeLost"}, -1001),
    ({"exit_code": None, "pod_reason": "OutOfcpu"}, -1002),
    ({"exit_code": None, "pod_reason": "OutOfnvidia.com/gpu"}, -1002),
    ({"exit_code": 137, "pod_reason": "Preempted"}, -1003),
    ({"exit_code": 137, "pod_reason": "DeadlineExceeded"}, -1004),
    ({"exit_code": 137, "signal": 9, "container_reason": "OOMKilled"}, -1200),
    ({"exit_code": None, "pod_reason": "UnexpectedAdmissionError"}, -1205),
    ({"exit_code": 126}, 126),
    ({"exit_code": 127}, 127),
    ({"exit_code": 130}, 130),
    ({"exit_code": None, "signal": 2}, 130),
    ({"exit_code": 143}, 143),
    ({"exit_code": None, "signal": 15}, 143),
    ({"exit_code": 137}, 137),
    ({"exit_code": None, "signal": 9}, 137),
    ({"exit_code": 132}, 132),
    ({"exit_code": 135}, 135),
    ({"exit_code": 136}, 136),
    ({"exit_code": 139}, 139),
    ({"exit_code": None, "signal": 11}, 139),
    ({"exit_code": 141}, 141),
    ({"exit_code": 134}, 134),
    ({"exit_code": 1, "log_tail": "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor"}, 221),
    ({"exit_code": 1, "log_tail": "RuntimeError: CUDA error: uncorrectable ECC error encountered"}, 223),
    ({"exit_code": 1, "log_tail": "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}, 226),
    ({"exit_code": None, "container_reason": "ErrImagePull"}, 254),
    ({"exit_code": None, "container_reason": "ImagePullBackOff"}, 254),
    ({"exit_code": 255}, 255),
    ({"exit_code": None}, 255),
    ({"exit_code": 1}, 256),
    ({"exit_code": -7}, -8000),
]


def test_the_data_file_has_exactly_the_rows_of_the_spec_with_their_types():
    assert {r.code: r.type for r in exit_spec().rows} == SPEC_TABLE


@pytest.mark.parametrize(("inputs", "code"), CASES, ids=[f"{c}-{i}" for i, (_, c) in enumerate(CASES)])
def test_each_row_is_classified_from_its_inputs(inputs, code):
    result = classify(**inputs)
    assert result.code == code
    assert result.type == SPEC_TABLE[code]


def test_every_row_is_reachable_by_some_case():
    assert {code for _, code in CASES} == set(SPEC_TABLE)


def test_every_row_says_who_caused_it_why_and_what_to_do():
    for r in exit_spec().rows:
        assert r.causer in {"user", "platform", "resource"}
        assert r.phrase and r.reason and r.issuer
        assert r.solution and all(isinstance(step, str) and step for step in r.solution)
        assert r.as_dict()["code"] == r.code
        assert r.as_dict()["solution"] == list(r.solution)


# OpenPAI's phrases for the codes its exit spec has (k8s-job-exit-spec.yaml).
OPENPAI_PHRASES = {
    0: "Succeeded", -101: "PodExternalDeleted", -111: "PodCreationTimeout", -200: "PodSpecPermanentError",
    -210: "StopFrameworkRequested", -220: "FrameworkAttemptCompletion", -1000: "PodEvicted",
    -1001: "PodNodeLost", -1002: "PodScheduledToInsufficientResourceNode", -1003: "PodPreemptedForCriticalPod",
    -1004: "PodDeadlineExceeded", -1200: "UserContainerDockerOOMKilled", 130: "ContainerSigIntReceived",
    132: "ContainerSigIllReceived", 134: "ContainerSigAbrtReceived", 135: "ContainerSigBusReceived",
    136: "ContainerSigFpeReceived", 137: "ContainerSigKillReceived", 139: "ContainerSigSegvReceived",
    141: "ContainerSigPipeReceived", 143: "ContainerSigTermReceived", 221: "ContainerTensorflowOOMKilled",
    223: "ContainerCudaUncorrectableECCError", 226: "ContainerCudaOOMKilled", 254: "ContainerImageNotExists",
    255: "PAIRuntimeUnknownFailed", 256: "PAIRuntimeExitAbnormally", -8000: "ContainerUndefinedNegativeExitCode",
}


def test_codes_openpai_names_have_openpais_phrases():
    assert {code: row(code).phrase for code in OPENPAI_PHRASES} == OPENPAI_PHRASES


@pytest.mark.parametrize(("code", "fallback"), [(1, 256), (2, 256), (42, 256), (200, 256), (250, 256),
                                                (-7, -8000), (-99999, -8000)])
def test_unknown_codes_keep_their_value_with_openpais_fallback_row(code, fallback):
    assert classify(code).code == row(code).code == fallback
    assert classify(code).type == "unknown"
    shown = row(code).as_dict(code)
    assert shown["code"] == code
    assert (shown["behavior"], shown["reaction"]) == ("UNKNOWN", "RETRY_TO_MAX")


def test_a_known_row_shows_its_own_code_and_openpais_behavior():
    assert row(137).as_dict(137) | {"reason": None, "solution": None} == {
        "code": 137, "phrase": "ContainerSigKillReceived", "type": "transient", "issuer": "user",
        "causer": "platform", "behavior": "TRANSIENT", "reaction": "ALWAYS_RETRY", "reason": None, "solution": None,
    }


def test_no_code_and_no_reason_is_unknown():
    assert classify(None).code == 255


def test_pai_codes_win_over_platform_reasons_and_logs():
    assert classify(-210, pod_reason="Evicted", log_tail="CUDA out of memory").code == -210


def test_platform_reasons_win_over_log_patterns_and_exit_codes():
    assert classify(137, container_reason="OOMKilled", log_tail="CUDA out of memory").code == -1200
    assert classify(1, pod_reason="NodeLost", log_tail="CUDA out of memory").code == -1001


def test_log_patterns_win_over_exit_codes_but_never_fail_a_success():
    assert classify(139, log_tail="CUDA out of memory").code == 226
    assert classify(0, log_tail="CUDA out of memory (recovered)").code == 0


def test_an_unrelated_container_reason_does_not_change_the_exit_code_row():
    assert classify(127, container_reason="Error").code == 127
    assert classify(0, container_reason="Completed").code == 0


def test_a_spec_file_with_a_bad_row_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("- {code: 255, phrase: X, type: sometimes, issuer: user, causer: user, reason: r, solution: [s]}\n")
    with pytest.raises(ValueError, match=r"exit spec\[0\]\.type"):
        ExitSpec.load(path)
    path.write_text("- {code: 255, phrase: X, type: unknown, issuer: user, causer: user, reason: r, solution: s}\n")
    with pytest.raises(ValueError, match=r"exit spec\[0\]\.solution: must be a list"):
        ExitSpec.load(path)
    path.write_text("- {code: 1, phrase: X, type: unknown, issuer: user, causer: user, reason: r, solution: [s]}\n")
    with pytest.raises(ValueError, match="fallback row 255"):
        ExitSpec.load(path)


@pytest.mark.parametrize("code", [221, 223, 226])
def test_log_pattern_rows_also_match_the_code_openpai_runtime_exited_with(code):
    assert classify(code).code == code
