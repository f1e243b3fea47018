"""verify.py: after a fix, what a run of the minimal case says (fixed, rejected by a
check, still failing, failing differently), read from the case file a reduction wrote."""

from __future__ import annotations

import json

import pytest

from fakes import bug, passes, signature
from shrinkgpu.signature import Strictness
from shrinkgpu.verify import (
    DIFFERENT,
    FIXED,
    REJECTED,
    STILL,
    CaseError,
    case_spec,
    classify,
    clean_env,
    launch_of,
    load_case,
    target_of,
)
from shrinkgpu.worker import Observation


def case_beside(tmp_path, **fields) -> dict:
    case = {"signature": json.loads(json.dumps(signature().to_json())), "keep_error": "out of bounds",
            "case": "train.min.py", "main": "train.py", **fields}
    (tmp_path / "train.min.json").write_text(json.dumps(case))
    return load_case(tmp_path / "train.min.py")


def test_a_run_after_the_fix_is_fixed_rejected_still_failing_or_failing_differently(tmp_path):
    target = target_of(case_beside(tmp_path))
    assert classify(passes(), target) == (FIXED, "")
    assert classify(bug(), target) == (STILL, "IndexError: Target 4 is out of bounds.")
    rejected = bug(signature("ValueError", "class targets must be in [0, 3]: 4 at position 2", op=None, line=7))
    assert classify(rejected, target) == (REJECTED, "ValueError: class targets must be in [0, 3]: 4 at position 2 "
                                                    "at train.py:7")
    elsewhere = bug(signature("RuntimeError", "shape mismatch", op="torch.matmul"))
    assert classify(elsewhere, target) == (DIFFERENT, "RuntimeError: shape mismatch at torch.matmul")
    assert classify(Observation.infrastructure("the supervisor process exited"), target) == (
        DIFFERENT, "could not run: the supervisor process exited")
    assert f"{STILL}" == "still failing"


def test_the_bug_after_a_fix_is_the_class_message_and_operator_not_the_tensors(tmp_path):
    target = target_of(case_beside(tmp_path, final_signature=json.loads(json.dumps(signature(line=3).to_json()))))
    assert target.strictness is Strictness.OPERATOR and target.pattern.pattern == "out of bounds"
    assert target.signature.frame.line == 3  # the result's own error, not the original's
    assert target.matches(signature(shape=(8, 4)))


def test_a_case_file_that_is_missing_or_unreadable_says_what_to_do(tmp_path):
    with pytest.raises(CaseError, match=r"train.min.json: no case file; `shrinkgpu reduce` writes one beside its "
                                        r"result"):
        load_case(tmp_path / "train.min.py")
    (tmp_path / "train.min.json").write_text("{")
    with pytest.raises(CaseError, match="not a readable case file"):
        load_case(tmp_path / "train.min.json")


def test_the_minimal_case_runs_as_the_case_file_says_from_its_directory(tmp_path):
    case = case_beside(tmp_path, args=["--n", "2"], nproc_per_node=2)
    with pytest.raises(CaseError, match="the minimal case is not there any more"):
        case_spec(case, {})
    (tmp_path / "train.min.py").write_text("explode(3)\n")
    spec, text = case_spec(case, {"PATH": "/bin"})
    assert (spec.script, spec.root_dir, spec.args, spec.argv0, text) == (
        tmp_path / "train.min.py", tmp_path, ("--n", "2"), "train.min.py", "explode(3)\n")
    assert (spec.launch.nproc, spec.launch.ranks) == (2, True)
    assert not launch_of(None).ranks


def test_the_diagnostic_variables_of_the_reduction_are_not_the_users():
    env = clean_env({"PATH": "/bin", "CUDA_LAUNCH_BLOCKING": "1", "AMD_SERIALIZE_KERNEL": "3",
                     "TORCH_USE_CUDA_DSA": "1"})
    assert env == {"PATH": "/bin"}


def test_the_runs_go_through_the_executor_it_is_given(tmp_path):
    from fakes import Log, executors
    from shrinkgpu.verify import verify

    case_beside(tmp_path)
    (tmp_path / "train.min.py").write_text("explode(3)\n")
    log = Log()
    done = verify(tmp_path / "train.min.py", original=False, timeout=60,
                  executors=executors(lambda text, job: passes(), log))
    assert log.texts == ["explode(3)\n"] and done.checks[0].outcome == FIXED
