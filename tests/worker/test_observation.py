"""worker/observation.py: ``Observation.from_run``, the step that turns a worker's JSON
report and captured output into an observation and its ``Signature``; no processes, no
torch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from shrinkgpu.signature import Family, OpRecord, Signature
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.protocol import Finished
from signatures import CE, DEVICE_ASSERT, FRAME, LOSS_ASSERT, LOSS_ASSERT_VALUE

# ======================================================================================
# Observation.from_run: the worker's JSON report -> Signature
# ======================================================================================


def finished(**kw):
    """The supervisor's event for a run that is over, as the client reads it."""
    return Finished.from_json({"event": "finished", "id": 1, "exit_code": None, "signal": None, "timed_out": False,
                               "cancelled": False, "wall": 0.25, **kw})


def rec_json(type, message, *, ident, op=None, frame=None):
    return {"type": type, "message": message, "ident": ident, "op": op, "frame": frame}


CE_JSON = {
    "name": CE,
    "tensors": [
        {"path": "args[0]", "dtype": "torch.float32", "shape": [3, 4], "stride": [4, 1], "device": "cuda:0"},
        {"path": "args[1]", "dtype": "torch.int64", "shape": [3], "stride": [1], "device": "cuda:0"},
    ],
    "others": ["reduction='mean'"],
}
ITEM_JSON = {"name": "Tensor.item",
             "tensors": [{"path": "args[0]", "dtype": "torch.float32", "shape": [], "stride": [], "device": "cuda:0"}]}
FRAME_JSON = dataclasses.asdict(FRAME)


@pytest.fixture
def run_dir(tmp_path):
    """Writes a report and the captured output; returns from_run's file arguments."""

    def make(report=None, *, stdout=None, stderr=None, raw=None):
        obs = tmp_path / "observation.json"
        out = tmp_path / "stdout"
        err = tmp_path / "stderr"
        if raw is not None:
            obs.write_text(raw, encoding="utf-8")
        elif report is not None:
            obs.write_text(json.dumps(report), encoding="utf-8")
        if stdout is not None:
            out.write_text(stdout, encoding="utf-8")
        if stderr is not None:
            err.write_text(stderr, encoding="utf-8")
        return obs, out, err

    return make


def report(status="exception", chain=(), torch_errors=(), **extra):
    data = {"status": status, "exit_code": 1 if status != "ok" else 0, "chain": list(chain),
            "torch_errors": list(torch_errors)}
    data.update(extra)
    return data


def test_from_run_timeout_has_no_signature_even_with_a_report(run_dir):
    root = rec_json("IndexError", "Target 4 is out of bounds.", ident=1, op=CE_JSON, frame=FRAME_JSON)
    files = run_dir(report(chain=[root], torch_errors=[root]), stderr=LOSS_ASSERT)
    obs = Observation.from_run(finished(timed_out=True, signal=9, wall=12.5), *files)
    assert obs.status == "timeout"
    assert obs.timed_out is True
    assert obs.signature is None and not obs.failed
    assert obs.describe() == "timed out after 12.5s"


def test_a_run_stopped_after_its_error_left_the_script_says_which_error_it_reached(run_dir):
    # The probe writes the first error beside the observation as it leaves the script,
    # then saves what its watch asks (the data objects); the limit came in that work.
    root = rec_json("IndexError", "Target 4 is out of bounds.", ident=1, op=CE_JSON, frame=FRAME_JSON)
    obs_path, out, err = run_dir(stderr=LOSS_ASSERT)
    Path(f"{obs_path}.first").write_text(json.dumps(report(chain=[root], torch_errors=[root], startup=1.7,
                                                           raised_calls=[{"op": CE, "call": 1, "path": "r-1"}])))
    obs = Observation.from_run(finished(timed_out=True, signal=9, wall=60.0), obs_path, out, err)
    assert (obs.status, obs.timed_out, obs.signature) == ("timeout", True, None)  # never a reproduction
    assert obs.raised_before_timeout.headline == "IndexError: Target 4 is out of bounds."
    assert obs.raised_calls == ({"op": CE, "call": 1, "path": "r-1"},) and obs.startup == 1.7
    assert obs.describe() == "timed out after 60.0s, after its first error IndexError: Target 4 is out of bounds."
    # a timed-out run without the record knows nothing of an error
    Path(f"{obs_path}.first").unlink()
    assert Observation.from_run(finished(timed_out=True, signal=9), *run_dir()).raised_before_timeout is None


def test_from_run_signal_without_report(run_dir):
    files = run_dir(None, stderr="Fatal Python error: Segmentation fault\n")
    obs = Observation.from_run(finished(signal=11), *files)
    assert obs.status == "signal"
    assert obs.signal == 11 and obs.exit_code is None
    assert obs.failed
    # What the dying interpreter said is part of the message and of the last words.
    assert obs.signature == Signature.for_signal(
        11, "SIGSEGV", output="\nFatal Python error: Segmentation fault\n",
        stderr="Fatal Python error: Segmentation fault\n"
    )
    assert obs.signature.message == "killed by signal 11 (SIGSEGV): Fatal Python error: Segmentation fault"
    assert obs.signature.crash_tail == ("Fatal Python error: Segmentation fault",)
    assert obs.signature.family is Family.CRASH
    assert obs.describe() == "signal.SIGSEGV: killed by signal 11 (SIGSEGV): Fatal Python error: Segmentation fault"


def test_from_run_signal_keeps_a_kernel_assertion_from_the_output(run_dir):
    files = run_dir(None, stdout=LOSS_ASSERT + "\n")
    obs = Observation.from_run(finished(signal=6), *files)
    assert obs.signature.type == "signal.SIGABRT"
    assert obs.signature.kernel_assertion == LOSS_ASSERT_VALUE


def test_from_run_signal_without_a_name(run_dir):
    files = run_dir(None)
    obs = Observation.from_run(finished(signal=40), *files)
    assert obs.signature.type == "signal.SIG40"
    assert obs.signature.message == "killed by signal 40 (SIG40)"


def test_from_run_exit_without_report(run_dir):
    files = run_dir(None)
    obs = Observation.from_run(finished(exit_code=3), *files)
    assert obs.status == "no-report"
    assert obs.signature is None and not obs.failed
    assert obs.exit_code == 3
    assert obs.describe() == "exited with status 3 without reporting (os._exit?)"


def test_from_run_unreadable_report_counts_as_no_report(run_dir):
    files = run_dir(raw='{"status": "exception", "chain": [')
    obs = Observation.from_run(finished(exit_code=1), *files)
    assert obs.status == "no-report"
    assert obs.signature is None


def test_from_run_report_with_a_chain(run_dir):
    caught = rec_json("IndexError", "Target 9 is out of bounds.\nmore", ident=7, op={**CE_JSON, "name": "torch.gather"})
    caught_no_op = rec_json("RuntimeError", "", ident=8)
    root = rec_json("IndexError", "index out of range in self", ident=1, op=CE_JSON, frame=FRAME_JSON)
    wrapper = rec_json("RuntimeError", "training failed", ident=2, frame=FRAME_JSON)
    files = run_dir(
        report(
            chain=[wrapper, root],
            torch_errors=[caught, caught_no_op, root],
            duration=0.75,
            modules=[["json", "/usr/lib/python3/json/__init__.py", None], ["helpers", "/r/helpers.py", "helpers.py"]],
            environment={"python": "3.12.1", "torch": "2.13.0"},
        ),
        stdout="step 1\n",
        stderr="Traceback ...\n",
    )
    obs = Observation.from_run(finished(exit_code=1), *files)
    assert obs.status == "exception"
    assert obs.failed
    sig = obs.signature
    assert (sig.type, sig.message, sig.normalized) == ("IndexError", "index out of range in self",
                                                       "index out of range in self")
    assert sig.family is Family.INDEX
    assert sig.op == OpRecord.from_json(CE_JSON)
    assert sig.frame == FRAME
    assert sig.kernel_assertion is None
    assert sig.caught_earlier == ("IndexError: Target 9 is out of bounds. in torch.gather", "RuntimeError: ")
    assert obs.duration == 0.75
    assert obs.modules == (("json", "/usr/lib/python3/json/__init__.py", None),
                           ("helpers", "/r/helpers.py", "helpers.py"))
    assert obs.environment == {"python": "3.12.1", "torch": "2.13.0"}
    assert obs.stdout == "step 1\n" and obs.stderr == "Traceback ...\n"


def test_from_run_caught_earlier_leaves_out_chain_members_and_later_errors(run_dir):
    harmless_torch = rec_json("RuntimeError", "view size is not compatible", ident=5, op=ITEM_JSON)
    root = rec_json("IndexError", "Target 4 is out of bounds.", ident=1, op=CE_JSON)
    wrapper_torch = rec_json("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)", ident=2,
                             op=ITEM_JSON)
    later = rec_json("ValueError", "after", ident=9, op=ITEM_JSON)
    files = run_dir(report(chain=[wrapper_torch, root], torch_errors=[harmless_torch, root, wrapper_torch, later]))
    sig = Observation.from_run(finished(exit_code=1), *files).signature
    assert sig.type == "IndexError"
    assert sig.caught_earlier == ("RuntimeError: view size is not compatible in Tensor.item",)


def test_from_run_sticky_error_is_attributed_to_the_earlier_operator(run_dir):
    earlier = rec_json("torch.AcceleratorError", DEVICE_ASSERT, ident=1, op=CE_JSON, frame=FRAME_JSON)
    innocent = rec_json(
        "torch.AcceleratorError",
        DEVICE_ASSERT,
        ident=2,
        op=ITEM_JSON,
        frame={"file": "train.py", "line": 120, "function": "log", "source": "print(loss.item())"},
    )
    files = run_dir(report(chain=[innocent], torch_errors=[earlier, innocent]), stderr=LOSS_ASSERT + "\n")
    sig = Observation.from_run(finished(exit_code=1), *files).signature
    assert sig.op.name == CE
    assert sig.frame == FRAME
    assert sig.kernel_assertion == LOSS_ASSERT_VALUE
    assert sig.family is Family.DEVICE_ASSERT
    assert sig.caught_earlier == ()


def test_from_run_ok_report(run_dir):
    files = run_dir(report(status="ok"))
    obs = Observation.from_run(finished(exit_code=0), *files)
    assert obs.status == "ok"
    assert obs.signature is None and not obs.failed
    assert obs.describe() == "finished without error (exit status 0)"


def test_from_run_nonzero_sys_exit(run_dir):
    files = run_dir(report(status="exit", chain=[rec_json("SystemExit", "2", ident=1)]))
    obs = Observation.from_run(finished(exit_code=2), *files)
    assert obs.status == "exit"
    assert obs.signature.headline == "SystemExit: 2"
    assert obs.signature.op is None


def test_from_run_probe_error_has_no_signature(run_dir):
    files = run_dir(report(status="probe-error", probe_error="No module named 'torch'"))
    obs = Observation.from_run(finished(exit_code=70), *files)
    assert obs.status == "probe-error"
    assert obs.signature is None


def test_from_run_error_event_is_an_infrastructure_observation(run_dir):
    root = rec_json("IndexError", "Target 4 is out of bounds.", ident=1, op=CE_JSON)
    files = run_dir(report(chain=[root]))
    obs = Observation.from_run(Finished(id=3, error="cannot fork: CUDA is initialized"), *files)
    assert obs.status == "infra"
    assert obs.infra_error == "cannot fork: CUDA is initialized"
    assert obs.signature is None and not obs.failed
    assert obs.describe() == "could not run: cannot fork: CUDA is initialized"
    assert obs == Observation.infrastructure("cannot fork: CUDA is initialized")


def test_from_run_reads_only_the_tail_of_huge_output(run_dir):
    from shrinkgpu.worker.observation import OUTPUT_TAIL

    files = run_dir(None, stdout="x" * (OUTPUT_TAIL + 100) + "END")
    obs = Observation.from_run(finished(exit_code=0), *files)
    assert len(obs.stdout) == OUTPUT_TAIL and obs.stdout.endswith("END")
    assert obs.stderr == ""
