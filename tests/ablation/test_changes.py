"""ablation/changes.py: what came of running one change (the same bug, a pass with its
result, or another error) and the short diff the report shows beside it."""

from __future__ import annotations

import json

from fakes import bug, passes, signature
from shrinkgpu.ablation.changes import (
    CALL,
    DATA,
    DIFFERENT,
    OUTPUT_MARK,
    PASSES,
    SAME,
    Change,
    diff_of,
    outcome_of,
    outcomes,
)
from shrinkgpu.signature import Target
from shrinkgpu.worker import Observation

TARGET = Target(signature())
CLAMPED = Change("target.clamp(0, 3)", "valid targets", {"c.py": "..."}, category=DATA, subject=CALL,
                 edit="- f(x, t)\n+ f(x, t.clamp(0, 3))")


def test_a_change_that_fails_alike_passes_or_fails_otherwise_says_so_with_what_it_was():
    same = outcome_of(CLAMPED, bug(), TARGET)
    assert (same.change, same.result, same.category, same.subject, same.edit) == (
        "target.clamp(0, 3)", SAME, DATA, CALL, "- f(x, t)\n+ f(x, t.clamp(0, 3))")
    ran = passes()
    printed = Observation(0, None, False, 0.01, "ok", None, stdout=f"loss\n{OUTPUT_MARK}float32[] all finite\n")
    assert outcome_of(CLAMPED, ran, TARGET).result == PASSES
    assert outcome_of(CLAMPED, printed, TARGET).output == "float32[] all finite"
    other = outcome_of(CLAMPED, bug(signature("RuntimeError", "CUDA error: an illegal memory access", op=None)), TARGET)
    assert (other.result, other.error) == (DIFFERENT, "RuntimeError: CUDA error: an illegal memory access")
    timed_out = Observation(None, 9, True, 5.0, "exception", None)
    assert outcome_of(CLAMPED, timed_out, TARGET).result == DIFFERENT  # a run that never ended does not pass


def test_outcomes_run_every_change_once_and_keep_their_order():
    asked = []

    def run(changes):
        asked.append([c.name for c in changes])
        return [bug(), passes()]

    got = outcomes([CLAMPED, Change("float64", "the usual precision", {})], run, TARGET)
    assert asked == [["target.clamp(0, 3)", "float64"]]
    assert [(o.change, o.result) for o in got] == [("target.clamp(0, 3)", SAME), ("float64", PASSES)]
    assert outcomes([], run, TARGET) == [] and len(asked) == 1
    assert json.loads(json.dumps(got[0].to_json()))["outcome"] == "same bug"


def test_the_diff_is_the_lines_removed_and_added_of_python_files_only():
    before = {"c.py": "x = 1\ny = f(x)\nz = 3\n", "notes.txt": "a\n"}
    after = {"c.py": "x = 1\ny = f(x.double())\nz = 3\n", "notes.txt": "b\n"}
    assert diff_of(before, after) == "- y = f(x)\n+ y = f(x.double())"
    assert diff_of(before, before) == ""
