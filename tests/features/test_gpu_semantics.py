"""How GPU errors really behave, checked on the CPU with real processes: an asynchronous
error localised by default, crashes told apart by more than their signal, the suspect
operator's arguments kept, and flaky first errors measured.  (Devices found and pinned
without initialising CUDA: tests/worker/test_devices.py; a candidate's device kept
across a retry: tests/test_oracle.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shrinkgpu.families import Family
from shrinkgpu.reducer import ReduceConfig, reduce, run_observed
from shrinkgpu.signature import Signature
from shrinkgpu.worker import Runner, ScriptSpec

DATA = Path(__file__).resolve().parents[1] / "data"
EXE = [sys.executable, "-m", "shrinkgpu"]


# -- 1. an asynchronous error is localised by default ------------------------------------------
@pytest.fixture()
def async_script(tmp_path) -> Path:
    shutil.copy(DATA / "async_gpu" / "train_async.py", tmp_path / "train_async.py")
    return tmp_path / "train_async.py"


def test_an_asynchronous_error_is_run_again_with_synchronous_launches(async_script):
    first = run_observed(ReduceConfig(script=async_script, cwd=async_script.parent))
    # Where Python saw it: the next synchronising call.
    assert first.surfaced is not None and first.surfaced.op.name == "Tensor.item"
    # Where the kernel failed: the loss, with the same kernel assertion.
    sig = first.observation.signature
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert sig.kernel_assertion == first.surfaced.kernel_assertion
    assert "t >= 0 && t < n_classes" in sig.kernel_assertion
    assert first.launch == ("CUDA_LAUNCH_BLOCKING", "1")
    assert first.config.env["CUDA_LAUNCH_BLOCKING"] == "1"
    # Asked not to, it stays where it surfaced.
    never = run_observed(ReduceConfig(script=async_script, cwd=async_script.parent, sync_launches="never"))
    assert never.observation.signature.op.name == "Tensor.item" and never.launch is None


def test_the_reduction_keeps_the_localised_signature_and_reports_both_places(async_script):
    result = reduce(
        ReduceConfig(
            script=async_script, cwd=async_script.parent, keep_error="device-side assert", max_tests=12,
            verify_runs=1, confirm=0,
        )
    )
    assert result.signature.op.name == "torch.nn.functional.cross_entropy"
    assert result.final_signature.op.name == "torch.nn.functional.cross_entropy"
    assert result.surfaced.op.name == "Tensor.item"
    assert result.launch_env == {"CUDA_LAUNCH_BLOCKING": "1"}
    report = result.report.read_text()
    assert "Tensor.item" in report and "torch.nn.functional.cross_entropy" in report
    assert "CUDA_LAUNCH_BLOCKING=1 python train_async.min.py" in report


# -- 2. a death by signal is the same bug only by its words, never by its number ------------------
ABORT = """\
import os, sys
def {function}():
    sys.stderr.write("{words}\\n")
    sys.stderr.flush()
    os.abort()
print("starting", flush=True)
{function}()
"""


@pytest.fixture(scope="module")
def abort_runner(tmp_path_factory):
    root = tmp_path_factory.mktemp("aborts")
    (root / "s.py").write_text("pass\n")
    with Runner(ScriptSpec(script=root / "s.py", cwd=root), capture_ops=False) as runner:
        runner.start()
        yield runner


def abort_sig(runner, function: str, words: str) -> Signature:
    obs = runner.run({"s.py": ABORT.format(function=function, words=words)}, timeout=30)
    assert obs.signal == 6, obs.describe()
    return obs.signature


def test_two_different_aborts_are_not_the_same_bug_and_the_same_one_is(abort_runner):
    a = abort_sig(abort_runner, "load_shard", "corrupted size vs. prev_size")
    again = abort_sig(abort_runner, "load_shard", "corrupted size vs. prev_size")
    assert a.type == "signal.SIGABRT" and a.family is Family.CRASH
    # faulthandler's dump names the last user frame; stderr holds the last words
    assert a.frame is not None and a.frame.function == "load_shard" and a.frame.source == "os.abort()"
    assert a.crash_tail == ("corrupted size vs. prev_size",)
    assert a.same_bug(again)
    other_words = abort_sig(abort_runner, "load_shard", "free(): invalid pointer")
    assert not a.same_bug(other_words)
    assert "different last lines on stderr" in a.differences(other_words)


def test_a_crash_keeps_the_scripts_stderr_as_python_writes_it(abort_runner):
    obs = abort_runner.run({"s.py": ABORT.format(function="f", words="last words")}, timeout=30)
    assert obs.stderr == "last words\n"  # the stack dump went to its own file


# -- 3. the operator's contract is kept whole -------------------------------------------------------
CE_ARGS = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    print("segmentation loss")
    logits = torch.randn(4, 3)
    target = torch.tensor([0, 255, 1, 3])  # 255 is the void label; 3 is a bug
    per_pixel = F.cross_entropy(logits, target, reduction="none", ignore_index=255)
    print(per_pixel.mean())
    """
)


def test_strict_reductions_keep_the_operators_non_default_arguments(tmp_path):
    (tmp_path / "seg.py").write_text(CE_ARGS)
    result = reduce(ReduceConfig(script=tmp_path / "seg.py", cwd=tmp_path, keep_error="out of bounds", verify_runs=1,
                                 confirm=0, jobs=1))
    assert result.signature.op.arguments == ("ignore_index=255", "reduction='none'")
    assert result.final_signature.op.arguments == result.signature.op.arguments
    text = result.output.read_text()
    assert "reduction='none'" in text.replace('"', "'") and "ignore_index=255" in text
    report = result.report.read_text()
    assert "ignore_index=255" in report


# -- 4. flaky first errors ------------------------------------------------------------------------
SET_ORDER = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F

    names = ["cat", "dog", "cat"]
    print("loading", len(names), "labels")
    vocab = list(set(names))  # the order depends on the hash seed
    index = {name: i for i, name in enumerate(vocab)}
    heads = 1  # the head was sized for one class
    target = torch.tensor([index["cat"]])
    loss = F.cross_entropy(torch.randn(1, heads), target)
    print("loss", loss)
    """
)


def test_a_set_order_failure_reduces_with_its_measured_rate(tmp_path):
    (tmp_path / "labels.py").write_text(SET_ORDER)
    done = subprocess.run(
        [*EXE, "reduce", "labels.py", "-k", "out of bounds", "--confirm", "12", "--max-tests", "4", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    ok, runs = data["original_rate"]["reproduced"], data["original_rate"]["runs"]
    # fails when "cat" lands at index 1: about one hash seed in two (113 of 200 under
    # python), so that 13 runs all agree about once in a thousand reductions
    assert runs >= 13 and 0 < ok < runs
    assert "in fresh interpreters the original reproduced in" not in done.stdout  # JSON only on stdout
    assert data["verified"]["runs"] >= 1
    report = (tmp_path / "labels.min.md").read_text()
    assert f"{ok} of {runs} runs" in report


def test_each_fork_server_lane_has_its_own_hash_seed_and_hides_the_variable(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    with Runner(ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=env), capture_ops=False, lanes=4) as runner:
        runner.start()
        seen = []
        for _ in range(4):
            obs = runner.run({"s.py": "import os; print(hash('shrinkgpu'), 'PYTHONHASHSEED' in os.environ)"},
                             timeout=30)
            seen.append(obs.stdout.split())
    assert len({h for h, _ in seen}) == 4
    assert {flag for _, flag in seen} == {"False"}
