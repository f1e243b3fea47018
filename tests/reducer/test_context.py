"""reducer/context.py: what every phase reads, made once by ``Reduction.prepare`` with
fake executors: a frozen value whose runners share the reduction's one sandbox."""

from __future__ import annotations

import dataclasses

import pytest

from fakes import NEEDLE, config
from shrinkgpu.worker import Isolation


def test_a_context_is_frozen_and_a_new_spec_is_a_new_context(script, contexts):
    ctx = contexts(config(script))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.main_text = ""
    synced = ctx.with_spec(dataclasses.replace(ctx.spec, env={"CUDA_LAUNCH_BLOCKING": "1"}))
    assert synced.spec.env == {"CUDA_LAUNCH_BLOCKING": "1"} and ctx.spec.env is None
    assert synced.sandbox is ctx.sandbox and synced.talk is ctx.talk and synced.limits is ctx.limits


def test_what_prepare_settles_before_any_run(script, contexts):
    ctx = contexts(config(script, keep_error="out of (bounds|range)"))
    assert ctx.main_text.endswith(NEEDLE + "\n") and ctx.pattern.pattern == "out of (bounds|range)"
    assert ctx.layout.output == script.with_name("train.min.py")
    assert not ctx.writing  # the tests' configs write nothing
    assert ctx.scratch.session == ctx.sandbox.session and ctx.scratch.call == ctx.sandbox.session / "call.pt"


def test_every_runner_of_a_reduction_copies_its_one_sandbox(script, contexts):
    ctx = contexts(config(script))
    with ctx.runner(Isolation.FRESH, program_files=["train.py"], threads=2) as runner:
        runner.start()
        obs = runner.run({"train.py": NEEDLE + "\n"}, timeout=5)
    assert obs.failed
    (isolation, job), = ctx.executors.log.jobs
    assert isolation is Isolation.FRESH and job.env["OMP_NUM_THREADS"] == "2"
    assert ctx.sandbox.session in job.run.path.parents
