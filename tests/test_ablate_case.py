"""ablate_case.py: ``shrinkgpu ablate RESULT`` refuses before comparing anything when the
case file is not there or the minimal case no longer fails the recorded way (one fresh
run; the comparisons themselves are tests/ablation/ and tests/features/test_handoff.py)."""

from __future__ import annotations

import json

import pytest

from fakes import signature
from shrinkgpu.ablate_case import NotReproducedHere, ablate_case
from shrinkgpu.verify import CaseError


def test_without_a_case_file_nothing_runs(tmp_path):
    with pytest.raises(CaseError, match="no case file"):
        ablate_case(tmp_path / "train.min.py")


def test_a_minimal_case_that_no_longer_fails_is_not_compared(tmp_path):
    (tmp_path / "train.min.py").write_text("print('fixed')\n")
    case = {"signature": json.loads(json.dumps(signature().to_json())), "keep_error": "out of bounds",
            "case": "train.min.py", "main": "train.min.py"}
    (tmp_path / "train.min.json").write_text(json.dumps(case))
    with pytest.raises(NotReproducedHere,
                       match="the minimal case does not fail with the recorded bug here: ") as caught:
        ablate_case(tmp_path / "train.min.py", timeout=60)
    assert caught.value.observation.signature is None and caught.value.observation.stdout == "fixed\n"


def test_the_runs_go_through_the_executor_it_is_given(tmp_path):
    # like check and reduce: a fake executor here, a Ray cluster elsewhere
    from fakes import Log, executors, passes

    (tmp_path / "train.min.py").write_text("explode(3)\n")
    case = {"signature": json.loads(json.dumps(signature().to_json())), "keep_error": "out of bounds",
            "case": "train.min.py", "main": "train.min.py"}
    (tmp_path / "train.min.json").write_text(json.dumps(case))
    log = Log()
    with pytest.raises(NotReproducedHere):
        ablate_case(tmp_path / "train.min.py", timeout=60, executors=executors(lambda text, job: passes(), log))
    assert log.texts == ["explode(3)\n"]
