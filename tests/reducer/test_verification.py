"""reducer/verification.py: the checks after the search, with a fake executor."""

from __future__ import annotations

import time

from fakes import SCRIPT, config, signature
from shrinkgpu.core import Outcome
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.verification import check_result
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Program
from shrinkgpu.worker import Isolation


def checked(ctx, history, script=None, **kw):
    runner = ctx.runner(Isolation.FORK)
    runner.start()
    try:
        oracle = Oracle(runner, Target(signature()), ctx.limits)
        return check_result(ctx, oracle, Outcome(history[-1], tuple(history), len(history), kw.get("stopped")),
                            oracle.target, [SCRIPT], script)
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


def test_a_search_started_larger_than_the_script_never_writes_more_than_the_script(script, contexts):
    # A start other than the user's program (the library's call made directly, its batch
    # written out as literals) may be larger than the script; the search's result must not be.
    ctx = contexts(config(script, verify_runs=1))
    user = Program({"train.py": SCRIPT}, "train.py").initial()
    batch = ", ".join(f"[{i}, {i}, {i}, {i}]" for i in range(20))
    cut = Program({"train.py": SCRIPT.replace("data = [1, 2, 3]", f"data = [{batch}]")}, "train.py").initial()
    shrunk = Program({"train.py": SCRIPT.replace("data = [1, 2, 3]", "data = [[0, 0], [1, 1]]")}, "train.py").initial()
    small = Program({"train.py": "explode(3)\n"}, "train.py").initial()
    assert cut.size > shrunk.size > user.size > small.size
    verified = checked(ctx, [cut, shrunk], user)
    assert verified.best.files == {"train.py": SCRIPT} and verified.counts == (1, 1)
    assert (f"the search ended at {shrunk.size} tokens, more than your script's {user.size} (it started from "
            f"{cut.size}): the result is your script") in ctx.talk.notes
    # a search stopped early keeps its newest state, partial, for --resume to go on from
    ctx = contexts(config(script, verify_runs=1))
    verified = checked(ctx, [cut, shrunk], user, stopped="test budget")
    assert verified.best is shrunk and not any("your script" in n for n in ctx.talk.notes)
    # one that ends smaller is the result, and says nothing of the script
    ctx = contexts(config(script, verify_runs=1))
    verified = checked(ctx, [cut, shrunk, small], user)
    assert verified.best.files == {"train.py": "explode(3)\n"}
    assert not any("your script" in n for n in ctx.talk.notes)


def test_a_check_cut_short_by_max_time_is_said_in_the_progress_lines(script, contexts):
    events = []
    ctx = contexts(config(script, max_time=1), on_event=events.append)
    ctx.limits.end = time.monotonic() - 1  # --max-time is spent
    verified = checked(ctx, [Program({"train.py": SCRIPT}, "train.py").initial()])
    assert verified.counts == (0, 0) and ctx.executors.log.jobs == []
    stages = [e.message for e in events if type(e).__name__ == "Stage"]
    assert ("the check of the result in a fresh interpreter was not tried: 0.0 s left of --max-time, it takes "
            "0.5 s (2 asked by --verify): the result is written marked partial, not re-checked in fresh "
            "interpreters") in stages


def test_an_interrupted_search_is_written_unchecked(script, contexts):
    ctx = contexts(config(script))
    verified = checked(ctx, [Program({"train.py": SCRIPT}, "train.py").initial()], stopped="interrupted")
    assert verified.counts == (0, 0) and verified.stopped == "interrupted"
    assert "interrupted: the result was not re-checked in fresh interpreters" in ctx.talk.notes


def test_what_the_result_reads_is_its_own_never_a_state_the_fallback_tried(script, contexts):
    # The newest state fails in a fresh run, and the fallback tries the states between:
    # one reproduces once, then not (flaky, rejected), and an older one is kept.  The
    # files the report says it needs are what the kept state's own runs read, not the
    # rejected state's, whose run matched last.
    import re

    from fakes import bug, passes

    reads = {"v1": ("data.csv", "vocab.txt"), "v2": ("data.csv", "other.bin")}
    runs: dict[str, int] = {}

    def behaviour(text, job):
        tag = re.search(r'tag = "(v\d)"', text).group(1)
        runs[tag] = runs.get(tag, 0) + 1
        if tag == "v3" or (tag == "v2" and runs[tag] > 1):
            return passes()
        return bug(signature(), reads=reads.get(tag, ()))

    ctx = contexts(config(script, verify_runs=2), behaviour)
    history = [Program({"train.py": f'{SCRIPT}\ntag = "v{i}"\n'}, "train.py").initial() for i in range(4)]
    verified = checked(ctx, history)
    assert 'tag = "v1"' in verified.best.files["train.py"] and verified.counts == (2, 2)
    assert verified.reads == ("data.csv", "vocab.txt")
    assert runs["v2"] == 2  # it reproduced once, then not
