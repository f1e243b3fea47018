"""reducer/world.py: the fewest ranks that fail the same way, and a result without ranks,
with fake executors that answer by the world size they run."""

from __future__ import annotations

import dataclasses

from fakes import SCRIPT, FakeExecutor, Log, bug, config, passes, signature
from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.reducer.first_run import FirstRun
from shrinkgpu.reducer.original import Original
from shrinkgpu.reducer.verification import Verified
from shrinkgpu.reducer.world import fewest_ranks, without_ranks
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Program

PEERLESS = signature("RuntimeError", "a collective needs two ranks", op=None)


def by_world(fails: dict[int, object], log: Log):
    """An executor factory whose runs end as ``fails[ranks]`` says (0: plain python)."""
    def make(isolation, settings):
        ranks = settings.launch.nproc if settings.launch.ranks else 0
        return FakeExecutor(isolation, settings, lambda text, job: fails[ranks], log)

    return make


def world(script, contexts, fails, nproc=4):
    log = Log()
    ctx = contexts(config(script, launch=Launch(nproc=nproc, ranks=True)))
    ctx = dataclasses.replace(ctx, executors=by_world(fails, log))
    first = bug()
    original = Original(FirstRun(first, ctx.spec, ctx.config), (first,))
    return ctx, original, log


def test_a_bug_one_ranks_shard_holds_too_runs_every_candidate_as_one_rank(script, contexts):
    ctx, original, log = world(script, contexts, {1: bug(), 2: bug(), 4: bug()})
    smaller, kept = fewest_ranks(ctx, original, Target(original.observation.signature))
    assert smaller.spec.launch.nproc == 1 and smaller.spec.launch.ranks
    assert kept.observation is not original.observation and kept.first.spec.launch.nproc == 1
    assert smaller.scratch.session.name == "world-1"  # its files apart from the original's
    assert len(log.jobs) == 1
    assert any(n.startswith("with 1 rank the original fails the same way as with 4") for n in ctx.talk.notes)


def test_two_ranks_are_tried_before_the_users_four(script, contexts):
    ctx, original, log = world(script, contexts, {1: bug(PEERLESS), 2: bug(), 4: bug()})
    smaller, _kept = fewest_ranks(ctx, original, Target(original.observation.signature))
    assert smaller.spec.launch.nproc == 2 and len(log.jobs) == 2


def test_a_bug_that_needs_the_users_world_keeps_it(script, contexts):
    ctx, original, log = world(script, contexts, {1: passes(), 2: bug(PEERLESS), 4: bug()})
    same, kept = fewest_ranks(ctx, original, Target(original.observation.signature))
    assert same is ctx and kept is original and len(log.jobs) == 2


def test_a_plain_script_has_no_world_to_shrink(script, contexts):
    ctx = contexts(config(script))
    first = bug()
    original = Original(FirstRun(first, ctx.spec, ctx.config), (first,))
    assert fewest_ranks(ctx, original, Target(first.signature)) == (ctx, original)


def verified_result():
    return Verified(Program({"train.py": SCRIPT}, "train.py").initial(), (2, 2), None, None)


def test_a_result_that_fails_alike_as_plain_python_runs_without_ranks(script, contexts):
    ctx, _original, log = world(script, contexts, {0: bug(), 1: bug()}, nproc=1)
    assert without_ranks(ctx, verified_result(), Target(bug().signature), "train.py") == PLAIN
    assert len(log.jobs) == ctx.config.verify_runs
    assert any(n.startswith("reproduces without torch.distributed") for n in ctx.talk.notes)


def test_a_result_that_needs_its_ranks_keeps_them(script, contexts):
    ctx, _original, _log = world(script, contexts, {0: bug(signature("ValueError", "RANK expected", op=None)),
                                                    2: bug()}, nproc=2)
    launch = without_ranks(ctx, verified_result(), Target(bug().signature), "train.py")
    assert launch == ctx.spec.launch and launch.nproc == 2
