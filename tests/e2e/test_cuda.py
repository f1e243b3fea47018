"""On a GPU: the CUDA variant of the class-index fixture, run and reduced for real.

Marked ``cuda``: skipped without a CUDA device (conftest.py).  What these check is
what only a GPU can show -- the first error is a device-side assert, its kernel
assertion is parsed, a forked worker gets a clean CUDA context after another worker's
context was poisoned, and the reduction keeps the device-side assert.  docs/gpu.md
records what was seen when a device was lent.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import CUDA_FIXTURE_NAMES, load_fixture, tree_digest
from shrinkgpu.reducer import ReduceConfig, reduce, run_observed, run_once
from shrinkgpu.signature import Family
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch, preload_candidates

pytestmark = pytest.mark.cuda

FX = load_fixture(CUDA_FIXTURE_NAMES[0])


def test_the_first_error_is_a_device_side_assert_with_its_kernel_assertion():
    obs, _ = run_once(ReduceConfig(script=FX.path, cwd=FX.dir), isolation=Isolation.FRESH)
    sig = obs.signature
    assert sig is not None, obs.describe()
    assert sig.family is Family.DEVICE_ASSERT
    assert "device-side assert" in sig.message
    assert sig.kernel_assertion is not None and "n_classes" in sig.kernel_assertion
    assert obs.environment.get("cuda")


def test_the_asynchronous_assert_is_localised_at_the_loss_with_launch_blocking():
    first = run_observed(ReduceConfig(script=FX.path, cwd=FX.dir))
    assert first.launch == ("CUDA_LAUNCH_BLOCKING", "1")
    sig = first.observation.signature
    assert sig is not None and sig.family is Family.DEVICE_ASSERT
    # With synchronous launches the error is raised by the loss call itself.
    assert sig.op is not None and "cross_entropy" in sig.op.name, sig.describe()
    assert first.surfaced is not None and first.surfaced.kernel_assertion == sig.kernel_assertion
    print("surfaced at:", first.surfaced.op.name if first.surfaced.op else None, "localised at:", sig.op.name)


def test_forked_workers_get_clean_cuda_contexts_after_a_device_side_assert(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("import torch\nx = torch.ones(4, device='cuda')\nprint(float((x * 2).sum()))\n")
    fail = tmp_path / "fail.py"
    fail.write_text(
        "import torch, torch.nn.functional as F\n"
        "F.cross_entropy(torch.randn(3, 4, device='cuda'), torch.tensor([0, 2, 4], device='cuda'))\n"
        "torch.cuda.synchronize()\n"
    )
    spec = ScriptSpec(script=fail, cwd=tmp_path)
    with Runner(spec, isolation=Isolation.FRESH) as fresh:
        fresh.start()
        first = fresh.run({"fail.py": fail.read_text()}, timeout=120, watch=Watch(collect_modules=True))
    with Runner(spec) as runner:
        runner.start(preload_candidates(first.modules))
        seen = []
        for text in (fail.read_text(), ok.read_text(), fail.read_text(), ok.read_text()):
            t0 = time.perf_counter()
            obs = runner.run({"fail.py": text}, timeout=120)
            seen.append((obs, time.perf_counter() - t0))
    assert seen[0][0].signature is not None and seen[0][0].signature.family is Family.DEVICE_ASSERT
    # A poisoned context dies with its process: the next child computes normally.
    assert seen[1][0].signature is None and seen[1][0].stdout.strip() == "8.0"
    assert seen[2][0].signature is not None and seen[2][0].signature.same_bug(seen[0][0].signature)
    assert seen[3][0].signature is None


def test_reduce_keeps_the_device_side_assert(tmp_path):
    before = tree_digest(FX.dir)
    out = tmp_path / "train_cuda.min.py"
    result = reduce(ReduceConfig(script=FX.path, keep_error=FX.keep_error, output=out, cwd=FX.dir, verify_runs=1))
    assert tree_digest(FX.dir) == before
    assert result.tokens_after < result.tokens_before
    assert result.launch_env == {"CUDA_LAUNCH_BLOCKING": "1"}  # localised by default
    first = run_observed(ReduceConfig(script=out, cwd=tmp_path))
    obs = first.observation
    assert obs.signature is not None and result.signature.same_bug(obs.signature, free=frozenset(result.varying)), (
        result.signature.differences(obs.signature))
    assert "cuda" in Path(out).read_text()
    # One change at a time on the GPU: the valid targets pass (a device-side assert of an
    # index is invalid data); the CPU's answer is a hint, shown, never the kind.
    ablated = result.ablation
    assert ablated is not None and ablated.kind == "invalid data", ablated
    by = {o.change: o for o in ablated.outcomes}
    assert by["valid values"].result == "passes" and by["valid values"].subject == "the extracted call"
    assert {"cuDNN off", "deterministic algorithms", "on the CPU"} <= set(by)


def test_the_fork_server_keeps_torch_preloaded_beside_the_real_driver(tmp_path):
    # A CUDA build maps libcuda.so.1 at import; on a GPU machine the real driver must say
    # "not initialised" until a CUDA call, and the preload must keep torch (issue 60).
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from shrinkgpu.worker.forksafety import driver_state, fork_hazard\n"
        "print(driver_state(), fork_hazard(deep=True))\n"
        "torch.cuda.init()\n"
        "print(driver_state(), fork_hazard() is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first in ("('libcuda.so.1', 'not initialised') None", "None None"), first  # ROCm maps no libcuda
    assert second.endswith("True"), second
    spec = ScriptSpec(script=FX.path, cwd=FX.dir)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        report = runner.start(["torch"], required=True)
    assert "torch" in report.modules and not report.dropped
