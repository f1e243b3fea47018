"""Verdicts, named from the reducer's side."""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    REPRODUCED = "reproduced"  # the same first error: keep the candidate
    FLAKY = "flaky"  # the same first error, but not in every run: not kept
    OTHER_ERROR = "other-error"  # failed, but with a different bug
    PASSED = "passed"  # ran to the end without the error
    TIMEOUT = "timeout"  # ran past its time limit (never a reproduction)
    CRASHED = "crashed"  # died without a report, or the worker failed
    INVALID = "invalid"  # never ran: does not compile, or does not shrink

    @property
    def interesting(self) -> bool:
        return self is Verdict.REPRODUCED
