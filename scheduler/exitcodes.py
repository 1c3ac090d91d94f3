"""The exit spec: classify how a task ended, from the table in ``exitspec.yaml``.

:func:`classify` picks one row, by this precedence (the first step that matches wins):

1. **pai's own codes** — a negative ``exit_code`` a row names (−101, −210, −220...):
   the reconciler or a backend decided the outcome itself, nothing overrides that;
2. **platform reasons** — the pod's reason (``Evicted``, ``NodeLost``, ``OutOf…``,
   ``Preempted``, ``DeadlineExceeded``...), then the container's (``OOMKilled``,
   ``ErrImagePull``...), in table order: the cluster knows why it ended the task better
   than the exit code it left (an OOM kill shows as 137);
3. **success** — exit code 0 (a log that mentions an error does not fail a task that
   succeeded);
4. **log patterns** — searched in ``log_tail`` in table order (221, 223, 226): a CUDA
   out-of-memory error usually exits with a plain 1;
5. **the exit code** — ``exit_code``, or ``128 + signal`` when only the signal is known;
6. **the fallbacks**, as OpenPAI's: row 256 (``PAIRuntimeExitAbnormally``) for any other
   positive code, row -8000 for any other negative one, row 255 (``PAIRuntimeUnknownFailed``)
   when there is no code at all. A fallback row is shown with the task's own code
   (:meth:`ExitSpecRow.as_dict`), so an exit code 1 stays 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import yaml

ExitType = Literal["succeeded", "transient", "permanent", "unknown"]
Causer = Literal["user", "platform", "resource"]

SPEC_PATH = Path(__file__).with_name("exitspec.yaml")
UNKNOWN_FAILURE = 255
FALLBACK_POSITIVE = 256
FALLBACK_NEGATIVE = -8000
# How much of a failed task's log to search for patterns and to show in job detail.
LOG_TAIL_LINES = 100

SUCCEEDED = 0
POD_EXTERNAL_DELETED = -101
POD_CREATION_TIMEOUT = -111
POD_CREATION_TRANSIENT_ERROR = -120
POD_CREATION_PERMANENT_ERROR = -200
STOP_REQUESTED = -210
ATTEMPT_COMPLETION = -220
# pai's own: the team's idle-GPU rule stopped the job (apps.monitoring.idle).
STOPPED_FOR_LOW_GPU_USE = -230
POD_EVICTED = -1000
POD_NODE_LOST = -1001
POD_PREEMPTED = -1003

_TYPES = {"succeeded", "transient", "permanent", "unknown"}
_CAUSERS = {"user", "platform", "resource"}
_PATTERN_KEYS = {"exit_codes", "pod_reasons", "container_reasons", "log_patterns"}


@dataclass(frozen=True)
class ExitSpecRow:
    code: int
    phrase: str
    type: ExitType
    issuer: str
    causer: Causer
    reason: str
    solution: tuple[str, ...]
    exit_codes: tuple[int, ...] = ()
    pod_reasons: tuple[re.Pattern[str], ...] = ()
    container_reasons: tuple[re.Pattern[str], ...] = ()
    log_patterns: tuple[re.Pattern[str], ...] = ()

    @property
    def is_failure(self) -> bool:
        return self.type != "succeeded"

    @property
    def is_fallback(self) -> bool:
        """The row of codes no row names: it stands for the code, which is shown as it is."""
        return self.code in (FALLBACK_POSITIVE, FALLBACK_NEGATIVE)

    def as_dict(self, code: int | None = None) -> dict[str, object]:
        """The row as job detail shows it, in OpenPAI's ExitSpec shape (the patterns left out).

        ``code`` is the exit code the row explains: a fallback row shows it in place of its
        own. ``behavior`` and ``reaction`` are OpenPAI's words for the row's ``type``.
        """
        behavior, reaction = _OPENPAI_BEHAVIOR[self.type]
        return {
            "code": code if code is not None and self.is_fallback else self.code,
            "phrase": self.phrase,
            "type": self.type,
            "issuer": self.issuer,
            "causer": self.causer,
            "behavior": behavior,
            "reaction": reaction,
            "reason": self.reason,
            "solution": list(self.solution),
        }


# type → OpenPAI's (behavior, reaction) of the same meaning.
_OPENPAI_BEHAVIOR = {
    "succeeded": ("UNKNOWN", "NEVER_RETRY"),
    "transient": ("TRANSIENT", "ALWAYS_RETRY"),
    "permanent": ("PERMANENT", "NEVER_RETRY"),
    "unknown": ("UNKNOWN", "RETRY_TO_MAX"),
}


class ExitSpec:
    """The rows of an exit spec file, validated, in file order."""

    def __init__(self, rows: list[ExitSpecRow]) -> None:
        self.rows = tuple(rows)
        self._by_code = {row.code: row for row in rows}
        self._by_exit_code = {code: row for row in rows for code in row.exit_codes}
        for code in (UNKNOWN_FAILURE, FALLBACK_POSITIVE, FALLBACK_NEGATIVE):
            if code not in self._by_code:
                raise ValueError(f"exit spec: needs the fallback row {code}")
        self.unknown = self._by_code[UNKNOWN_FAILURE]

    @classmethod
    def load(cls, path: Path = SPEC_PATH) -> ExitSpec:
        with open(path) as f:
            data = yaml.safe_load(f)
        rows, seen = [], set()
        for i, item in enumerate(data):
            row = _parse_row(i, item)
            if row.code in seen:
                raise ValueError(f"exit spec[{i}].code: {row.code} appears twice")
            seen.add(row.code)
            rows.append(row)
        return cls(rows)

    def row(self, code: int) -> ExitSpecRow:
        """The row of ``code``; the fallback row of its sign for codes no row has."""
        found = self._by_code.get(code)
        if found is not None:
            return found
        return self._by_code[FALLBACK_POSITIVE if code > 0 else FALLBACK_NEGATIVE]

    def classify(
        self,
        exit_code: int | None,
        signal: int | None = None,
        pod_reason: str = "",
        container_reason: str = "",
        log_tail: str = "",
    ) -> ExitSpecRow:
        """The row that explains a task's end; see the module docstring."""
        if exit_code is None and signal:
            exit_code = 128 + signal
        if exit_code is not None and exit_code < 0 and exit_code in self._by_exit_code:
            return self._by_exit_code[exit_code]
        for reason, attribute in ((pod_reason, "pod_reasons"), (container_reason, "container_reasons")):
            if reason:
                for row in self.rows:
                    if any(p.fullmatch(reason) for p in getattr(row, attribute)):
                        return row
        if exit_code == 0:
            return self._by_code[SUCCEEDED]
        if log_tail:
            for row in self.rows:
                if any(p.search(log_tail) for p in row.log_patterns):
                    return row
        if exit_code is None:
            return self.unknown
        if exit_code in self._by_exit_code:
            return self._by_exit_code[exit_code]
        return self.row(exit_code)


def _parse_row(i: int, item: object) -> ExitSpecRow:
    where = f"exit spec[{i}]"
    if not isinstance(item, dict):
        raise ValueError(f"{where}: must be a mapping")
    for key in ("code", "phrase", "type", "issuer", "causer", "reason", "solution"):
        if key not in item:
            raise ValueError(f"{where}.{key}: required")
    if item["type"] not in _TYPES:
        raise ValueError(f"{where}.type: must be one of {sorted(_TYPES)}")
    if item["causer"] not in _CAUSERS:
        raise ValueError(f"{where}.causer: must be one of {sorted(_CAUSERS)}")
    solution = item["solution"]
    if not (isinstance(solution, list) and solution and all(isinstance(step, str) for step in solution)):
        raise ValueError(f"{where}.solution: must be a list of steps (strings)")
    patterns = item.get("patterns") or {}
    unknown = set(patterns) - _PATTERN_KEYS
    if unknown:
        raise ValueError(f"{where}.patterns: unknown key {sorted(unknown)[0]!r}")
    return ExitSpecRow(
        code=int(item["code"]),
        phrase=str(item["phrase"]),
        type=item["type"],
        issuer=str(item["issuer"]),
        causer=item["causer"],
        reason=str(item["reason"]),
        solution=tuple(solution),
        exit_codes=tuple(int(c) for c in patterns.get("exit_codes", ())),
        pod_reasons=tuple(re.compile(p) for p in patterns.get("pod_reasons", ())),
        container_reasons=tuple(re.compile(p) for p in patterns.get("container_reasons", ())),
        log_patterns=tuple(re.compile(p) for p in patterns.get("log_patterns", ())),
    )


@cache
def exit_spec() -> ExitSpec:
    """The project's exit spec (``exitspec.yaml``), loaded once."""
    return ExitSpec.load()


def classify(
    exit_code: int | None,
    signal: int | None = None,
    pod_reason: str = "",
    container_reason: str = "",
    log_tail: str = "",
) -> ExitSpecRow:
    """Classify with the project's exit spec; see :meth:`ExitSpec.classify`."""
    return exit_spec().classify(exit_code, signal, pod_reason, container_reason, log_tail)


def row(code: int) -> ExitSpecRow:
    """The project's row for ``code`` (the fallback row for unknown codes)."""
    return exit_spec().row(code)
