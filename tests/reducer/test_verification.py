"""reducer/verification.py: the checks after the search, with a fake executor."""

from __future__ import annotations

import time

from shrinkgpu.core import Outcome
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.verification import check_result
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Program
from shrinkgpu.worker import Isolation

from fakes import SCRIPT, config, signature


def checked(ctx, history, **kw):
    runner = ctx.runner(Isolation.FORK)
    runner.start()
    try:
        oracle = Oracle(runner, Target(signature()), ctx.limits)
        return check_result(ctx, oracle, Outcome(history[-1], tuple(history), len(history), kw.get("stopped")),
                            oracle.target, [SCRIPT])
    finally:
        runner.close()


def test_a_best_program_with_more_tokens_than_the_start_falls_back_to_the_start(script, contexts):
    # The search minimises a weighted order: a candidate with fewer blocks may render to
    # more tokens than the program it came from, and that is no reduction.
    ctx = contexts(config(script, verify_runs=1))
    start = Program({"train.py": SCRIPT}, "train.py").initial()
    larger = SCRIPT.replace("data = [1, 2, 3]", "data = [1, 2, 3] + [4, 5, 6] + [7, 8, 9]")
    grown = Program({"train.py": larger}, "train.py").initial()
    assert grown.size > start.size
    verified = checked(ctx, [start, grown])
    assert verified.best.files == {"train.py": SCRIPT} and verified.counts == (1, 1)
    assert [iso for iso, _ in ctx.executors.log.jobs] == [Isolation.FRESH]


def test_a_check_cut_short_by_max_time_is_said_in_the_progress_lines(script, contexts):
    events = []
    ctx = contexts(config(script, max_time=1), on_event=events.append)
    ctx.limits.end = time.monotonic() - 1  # --max-time is spent
    verified = checked(ctx, [Program({"train.py": SCRIPT}, "train.py").initial()])
    assert verified.counts == (0, 0) and ctx.executors.log.jobs == []
    stages = [e.message for e in events if type(e).__name__ == "Stage"]
    assert any(s.startswith("--max-time was reached: the result was not re-checked in fresh interpreters (2 asked")
               for s in stages)


def test_an_interrupted_search_is_written_unchecked(script, contexts):
    ctx = contexts(config(script))
    verified = checked(ctx, [Program({"train.py": SCRIPT}, "train.py").initial()], stopped="interrupted")
    assert verified.counts == (0, 0) and verified.stopped == "interrupted"
    assert "interrupted: the result was not re-checked in fresh interpreters" in ctx.talk.notes
