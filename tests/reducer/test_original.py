"""reducer/original.py: the original's first run and the bug to keep, with a fake executor."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fakes import NEEDLE, bug, config, executors, fails_with_needle, passes, signature
from shrinkgpu.families import Family
from shrinkgpu.reducer import NotReproduced, ReduceError, reduce
from shrinkgpu.reducer.original import observe_original, target_of
from shrinkgpu.worker import Isolation, Observation, RunStatus


def test_the_first_run_is_the_users_run_watched_for_everything_the_passes_need(script, contexts):
    ctx = contexts(config(script, extract=True, write=True))
    original = observe_original(ctx)
    assert original.observation.signature is not None and len(original.attempts) == 1
    [(isolation, job)] = ctx.executors.log.jobs
    assert isolation is Isolation.FRESH
    watch = job.request.watch
    assert watch.count_loops and watch.collect_modules and watch.op_shapes and watch.sizes
    assert watch.keep_raised == str(ctx.scratch.raised) and watch.cut == str(ctx.scratch.call)
    assert job.request.argv == (job.request.script,)  # typed absolute: the copy's path
    assert Path(job.request.cwd).name == "root"


def test_a_flaky_original_that_passed_first_is_run_again(script, contexts):
    calls = []

    def flaky(text, job):
        calls.append(text)
        return passes() if len(calls) == 1 else bug()

    original = observe_original(contexts(config(script), flaky))
    assert [o.signature is not None for o in original.attempts] == [False, True]
    assert original.observation.signature is not None


@pytest.mark.parametrize(
    ("behaviour", "kw", "message"),
    [
        (lambda t, j: passes(), {}, "the script did not fail"),
        (lambda t, j: bug(signature("RuntimeError", "mat1 and mat2 shapes cannot be multiplied")), {},
         "does not match --keep-error 'out of bounds'"),
        (lambda t, j: bug(), {"keep_error": None, "family": Family.OUT_OF_MEMORY},
         "is not of the family 'out-of-memory'"),
    ],
)
def test_an_original_that_does_not_fail_as_asked_is_not_reproduced(script, contexts, behaviour, kw, message):
    ctx = contexts(config(script, confirm=0, **kw), behaviour)
    with pytest.raises(NotReproduced, match=re.escape(message)) as caught:
        target_of(ctx, observe_original(ctx))
    assert caught.value.exit_code == 3


def test_an_original_that_times_out_names_the_limit(script, contexts):
    def slow(text, job):
        return Observation(None, None, True, 7.0, RunStatus.TIMEOUT, None)

    ctx = contexts(config(script, confirm=0), slow)
    with pytest.raises(NotReproduced, match=r"did not finish within 7s \(--timeout\)"):
        target_of(ctx, observe_original(ctx))


def test_an_original_that_could_not_run_is_an_error_not_a_verdict(script, contexts):
    ctx = contexts(config(script, confirm=0), lambda t, j: Observation.infrastructure("the supervisor died"))
    with pytest.raises(ReduceError, match="could not run the script: the supervisor died"):
        target_of(ctx, observe_original(ctx))


def test_a_length_the_original_grew_does_not_identify_the_bug(script, contexts):
    def grown(length: int):
        return signature("IndexError", "index out of range in self", op="torch.nn.functional.embedding",
                         shape=(1, length))

    def grows_until_it_fails(text, job):
        if NEEDLE not in text:
            return passes()
        if job.request.watch.op_shapes:  # the first run: the loop grew the context to 57
            return bug(grown(57), op_shapes={"torch.nn.functional.embedding": {"args[0]": ((1, 1), (1, 2), (1, 57))}})
        return bug(grown(2))  # without the training, the same bug two tokens in

    ctx = contexts(config(script, keep_error="out of range"), grows_until_it_fails)
    target = target_of(ctx, observe_original(ctx))
    assert target.free == {("args[0]", 1)}
    assert target.matches(grown(2)) and not target.matches(
        signature("IndexError", "index out of range in self", op="torch.nn.functional.embedding", shape=(2, 2)))
    assert ctx.talk.notes == [
        "across the original's calls of torch.nn.functional.embedding, dimension 1 of args[0] (1, 2, 57) took several "
        "sizes: the program varies them (a sequence a loop grows, a short last batch), so a candidate that fails the "
        "same way with another size there is the same bug; every other dimension stays strict"
    ]
    result = reduce(config(script, keep_error="out of range"), executors=executors(grows_until_it_fails))
    assert result.files == {"train.py": NEEDLE + "\n"} and result.varying == (("args[0]", 1),)


def test_the_users_own_run_has_no_default_limit_but_the_ones_asked_for(script, contexts):
    from shrinkgpu.reducer.first_run import UNLIMITED

    ctx = contexts(config(script))
    observe_original(ctx)
    assert ctx.executors.log.jobs[0][1].timeout == UNLIMITED  # a job that fails after two hours is the point
    ctx = contexts(config(script, timeout=30.0))
    observe_original(ctx)
    assert ctx.executors.log.jobs[0][1].timeout == 30.0


def test_a_long_first_run_says_it_is_still_running(script, contexts):
    import threading

    from fakes import FakeExecutor, Log

    class Slow(FakeExecutor):
        def submit(self, job):
            future = super().submit(job)
            late = type(future)()
            threading.Timer(0.35, lambda: late.set_result(future.result())).start()
            return late

    log = Log()
    events = []
    ctx = contexts(config(script), on_event=events.append)
    ctx = dataclasses.replace(ctx, executors=lambda isolation, settings: Slow(isolation, settings,
                                                                              fails_with_needle, log))
    ctx.talk.heartbeat = 0.1
    observe_original(ctx)
    waits = [e.message for e in events if type(e).__name__ == "Stage" and "still running" in e.message]
    assert 2 <= len(waits) <= 4
    assert waits[0].startswith("the original is still running (0:00)")
