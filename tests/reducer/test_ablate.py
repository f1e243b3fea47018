"""reducer/ablate.py: the verified result with one change at a time, with a fake executor."""

from __future__ import annotations

from fakes import bug, config, passes, signature
from shrinkgpu.reducer.ablate import ablate
from shrinkgpu.reducer.extraction import Extracted
from shrinkgpu.reducer.pool import Measured, open_pool, plan_workers
from shrinkgpu.reducer.verification import Verified
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Program
from shrinkgpu.worker import Isolation

COMPILED = """\
import torch


def gate(x):
    return x


fn = torch.compile(gate, fullgraph=True)
explode(3)
"""
GRAPH_BREAK = signature("torch._dynamo.exc.Unsupported", "Data-dependent branching", op=None)


def fails_compiled(text, job):
    """Compilation off passes; every backend fails the same way."""
    return bug(GRAPH_BREAK) if "torch.compile" in text and "explode(3)" in text else passes()


def ablated(ctx, verified_counts=(2, 2)):
    first = bug(GRAPH_BREAK)
    plan = plan_workers(ctx, first)
    files = {"train.py": COMPILED}
    target = Target(GRAPH_BREAK)
    pool = open_pool(ctx, first, (first,), target, files, Measured(files, "the original", first.wall), plan)
    try:
        best = Program(files, "train.py").initial()
        ctx.executors.log.jobs.clear()  # the pool's own runs are not the comparisons'
        return ablate(ctx, pool, Verified(best, verified_counts, GRAPH_BREAK, None), Extracted(None, None), target,
                      "train.py")
    finally:
        pool.close()


def test_each_change_of_a_compile_failure_runs_once_in_a_fresh_interpreter(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(COMPILED)
    ctx = contexts(config(script, keep_error="Data-dependent"), fails_compiled)
    result = ablated(ctx)
    assert result is not None
    by = {o.change: o.result for o in result.outcomes}
    assert by["torch.compile off"] == "passes" and by['backend="eager"'] == "same bug"
    assert [iso for iso, _ in ctx.executors.log.jobs] == [Isolation.FRESH] * len(result.outcomes)
    assert result.kind and result.reason


def test_an_unverified_result_is_not_compared(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(COMPILED)
    ctx = contexts(config(script, keep_error="Data-dependent"), fails_compiled)
    assert ablated(ctx, verified_counts=(0, 0)) is None
    ctx = contexts(config(script, keep_error="Data-dependent", ablate=False), fails_compiled)
    assert ablated(ctx) is None
