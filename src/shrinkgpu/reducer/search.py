"""The search (a reduction's central phase): ``core.reduce_to_fixpoint`` over the tiers
of passes, from the start point, with the oracle's judgements as its verdicts.

``Adapter`` is the one seam between the pure core and the rest: ``test_many`` hands the
core's candidates to the oracle and keeps each ``Judgement`` (the verdict goes to the
core, the observation stays here); ``rebase`` makes an accepted candidate the new
original from the judgement of its own run: a fresh ``Program`` of its text, with the
facts of that run and the ones every program carries (``RunFacts``).  Only when those
facts must be recorded again (the loops around the failure moved as the data shrank,
the data objects as this program builds them) is the program run once more, with that
``Watch``, charged to the same test budget: recording them in every candidate's run
would pickle the data objects of every candidate that reproduces.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

from shrinkgpu.core import Outcome, Verdict, reduce_to_fixpoint
from shrinkgpu.oracle import Judgement, Oracle, files_key
from shrinkgpu.passes import LOADING, PASSES
from shrinkgpu.passes.external import ExternalProposals
from shrinkgpu.reducer import resume
from shrinkgpu.reducer import state as state_rules
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.events import BestSoFar, Reducing
from shrinkgpu.reducer.facts import Input, RunFacts, loop_around_failure, saved_objects
from shrinkgpu.reducer.pool import Pool
from shrinkgpu.reducer.proposer import ShellProposer
from shrinkgpu.reducer.start import Start
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Candidate
from shrinkgpu.syntax.facts import loop_facts
from shrinkgpu.worker import Placement, Watch

# Loops are counted again (and data objects saved again) at a rebase only while a run of
# the program takes at most this, in units of this machine's import of torch
# (``Limits.startups``; 3 is about 5 s on the development machine): the decision a busy
# machine, slower at both, takes alike.
RECOUNT_MAX_STARTUPS = 3.0


@dataclass(frozen=True)
class Searched:
    """What the search did: the core's outcome, the size it started from, the facts of
    the last program it rebased (its data objects saved again), the files they load,
    and (seconds since the start, tokens) at each accepted program."""

    outcome: Outcome
    original_size: int
    facts: RunFacts
    data_files: dict[str, Path]
    trace: tuple[tuple[float, int], ...]
    resumed: bool = False  # it started from the partial result an earlier run left (--resume)
    seconds: float = 0.0  # the search's own time, from its first candidate to its fixpoint or stop
    placement: Placement | None = None  # where its candidates ran


class Adapter:
    """The core's ``test_many`` and ``normalize`` for one search."""

    def __init__(self, ctx: Context, oracle: Oracle, target: Target, main: str, facts: RunFacts,
                 keep_hot: bool = False):
        self.ctx = ctx
        # whether the hot loops stay worth cutting first after the first rebase: only a
        # long original's (``state.long_run``), whose loops keep its runs long until they
        # are cut; a short one's are offered to the search's first program alone
        self.keep_hot = keep_hot
        self.oracle = oracle
        self.target = target
        self.main = main
        self.facts = facts
        self.data_files: dict[str, Path] = {}
        self.trace: list[tuple[float, int]] = []
        self._judged: dict[tuple, Judgement] = {}
        self._recordings = itertools.count(1)

    def test_many(self, cands: list[Candidate]) -> list[Verdict]:
        judgements = self.oracle.judge(cands)
        for cand, judgement in zip(cands, judgements):
            if judgement.verdict is Verdict.REPRODUCED:
                self._judged[files_key(cand.files)] = judgement
                if judgement.observation is not None:
                    # A reproducing candidate is what the search keeps: the time kept for
                    # the final checks follows its run at once, not only when the pass ends.
                    self.ctx.limits.saw_result(judgement.observation.wall)
        return [j.verdict for j in judgements]

    def test(self, cand: Candidate) -> Verdict:
        return self.test_many([cand])[0]

    def accepted(self, cand: Candidate) -> None:
        self.ctx.talk.emit(BestSoFar(dict(cand.files), self.main, cand.size))
        self.trace.append((round(self.ctx.limits.elapsed(), 3), cand.size))

    def rebase(self, cand: Candidate) -> Candidate:
        """The accepted candidate becomes the new original: fresh statement ids and
        dependencies for its own text, and the facts of its own run."""
        if not cand.edits:
            return cand
        files = cand.files
        self.accepted(cand)
        judged = self._judged.get(files_key(files))
        seen = judged.observation if judged is not None else None
        if seen is not None:
            limit = self.ctx.limits.follow(seen.wall)
            if limit is not None:
                self.ctx.talk.stage(f"candidates now time out after {limit:.1f}s (the program they are cut from "
                                    f"runs {seen.wall:.1f}s; the original {self.ctx.limits.original_wall:.1f}s)")
        # A loop stays worth cutting first while runs are still long: a long original's
        # while it is in the program (its units need it there), a short one's never
        # after the first program.  A count, not a run time: the same path idle or busy.
        limits = self.ctx.limits
        hot = self.keep_hot
        rebased = self.facts.program(files, self.main, seen, hot=hot)
        quick = seen is not None and limits.startups(seen.wall) <= RECOUNT_MAX_STARTUPS
        short = seen is None or limits.startups(seen.wall) <= RECOUNT_MAX_STARTUPS  # (no run seen: a cache hit)
        # The objects as this program builds them, not as the original did: the code
        # after them has been reduced against this program's data, and a load of the
        # original's object would often no longer fail the same way.  At every rebase,
        # so the file beside the program is never a stale one.  A helper's result is
        # offered only to a program started from the saved state.
        offered = [o for o in self.facts.saved_objects if not o.targets or self.facts.state is not None]
        save = short and offered and not all(any(o.file in t for t in files.values()) for o in offered)
        # Shrinking the data moves the failing item: count again, on this program (one
        # more run: only while runs are short, or it costs more than it saves).
        count = quick and rebased.loop_iterations and loop_around_failure(rebased)
        if (save or count) and self.ctx.limits.exhausted() is None:
            loops = self.record_again(files, save=bool(save), count=bool(count))
            facts = self.facts if loops is None else dataclasses.replace(self.facts, loops=loops)
            rebased = facts.program(files, self.main, seen, hot=hot)
        return rebased.initial()

    def record_again(self, files, *, save: bool, count: bool):
        """One run of the accepted program recording what its rebase needs, charged to
        the test budget the search spends: its data objects (kept for the programs after
        it) and its loops (returned: this program's own, None when not counted)."""
        ctx = self.ctx
        watch = Watch(
            count_loops=count,
            save_objects=str(ctx.scratch.objects_again(next(self._recordings))) if save else None,
            save_results_after=0.0 if save and self.facts.state is not None else None,
        )
        # (inside the search's deadline, which the search checked before this rebase; a
        # run that would pass --max-time is cut at its end like a candidate)
        again = self.oracle.observe(files, timeout=min(ctx.limits.calibrated, ctx.limits.run_limit()), watch=watch)
        ctx.limits.charge()
        if not self.target.matches(again.signature):
            return None
        facts = self.facts
        fresh, fresh_files = saved_objects(again, ctx.spec, ctx.sandbox, ctx.layout) if save else ((), {})
        if fresh:
            # A loaded object is not saved again (its statement is no longer the helper's
            # call): its record stays while the program reads its file.
            names = {o.file for o in fresh}
            fresh = (*fresh, *(o for o in facts.saved_objects if o.file not in names
                               and any(o.file in t for t in files.values())))
            self.facts = dataclasses.replace(facts, saved_objects=fresh)
            self.data_files.update(fresh_files)
        return loop_facts(files, again.loops) if count else None


def search(ctx: Context, oracle: Oracle, pool: Pool, inp: Input, start: Start, target: Target,
           original_wall: float) -> Searched:
    """The search from ``start`` (or the partial result --resume finds), to a fixpoint
    or until the limits stop it; ``original_wall``: the original's first run."""
    talk, limits = ctx.talk, ctx.limits
    # Before any candidate ran, the result is expected to take what the original took
    # outside its hot loops: they go first, and keeping four runs of a slow original back
    # would leave the search no time to cut them (the deadline follows the real run times
    # from the first reproducing candidate on).
    expected = original_wall * (1.0 - max((share for _, _, share in start.facts.hot_loops), default=0.0))
    limits.searching(original_wall, expected, pool.preload.seconds)
    initial = inp.program.initial()
    original_size = initial.size
    if start.program is not None:
        # Every candidate then skips the iterations before the failing one.
        initial = start.program.initial()
        if start.state is not None:
            talk.note(f"the search starts at the failing step, from the saved state ({initial.size} tokens)")
        else:
            talk.note(f"the search starts from {start.what} ({initial.size} tokens)")
        limit = limits.follow(start.wall)
        if limit is not None:
            talk.stage(f"candidates now time out after {limit:.1f}s (the program they are cut from runs "
                       f"{start.wall:.1f}s; the original {original_wall:.1f}s)")
    adapter = Adapter(ctx, oracle, target, inp.main, start.facts, keep_hot=state_rules.long_run(original_wall, limits))
    resumed = False
    if ctx.config.resume:
        partial = resume.partial_start(ctx, oracle, target, start.facts, inp.main)
        if isinstance(partial, str):
            talk.note(partial)
        else:
            talk.note(f"resumed from the partial result at {ctx.layout.output.name} ({partial.size} tokens)")
            initial, resumed = partial, True
    if pool.no_search is not None:
        # (the pool said why: --max-time left too little to prepare it)
        limits.saw_result(start.wall)  # the result is the start: the checks after it take its run
        adapter.trace.append((round(limits.elapsed(), 3), initial.size))
        return Searched(Outcome(initial, (initial,), 0, "time limit reached"), original_size, adapter.facts,
                        adapter.data_files, tuple(adapter.trace), resumed, placement=pool.runner.placement())
    modules = sorted(p for p in inp.files if p.endswith(".py"))
    if ctx.config.output is not None and len(modules) > 1 and ctx.layout.output.suffix == ".py":
        talk.note(
            f"the program is {len(modules)} files ({', '.join(modules)}): if the result still needs more than "
            f"one, it is written as the directory {ctx.layout.directory.name}/ beside "
            f"{ctx.layout.output.name}, and nothing is left at {ctx.layout.output.name}"
        )
    talk.stage(f"reducing {initial.size} tokens (timeout {oracle.timeout:.1f}s per candidate)")
    talk.emit(Reducing(dict(initial.files), inp.main, initial.size))
    adapter.trace.append((round(limits.elapsed(), 3), initial.size))
    tiers = PASSES
    if start.state is not None and start.program is not None and start.facts.saved_objects:
        # Started at the failing step, a candidate still builds the data the step reads
        # before it restores the state (a synthesised dataset, a click log), and that is
        # most of its run: loading them goes first.  The result loads the state's file
        # already; a pickled dataset beside it hides no more.
        tiers = (LOADING, *(t for t in PASSES if t is not LOADING))
        talk.note("started from the saved state: loading the data objects the first run saved is tried first "
                  "(kept where the code that builds one costs more than what its file carries)", show=False)
    if ctx.config.propose_with:
        # Last: what the passes could not shrink any more goes to the command, and what it
        # proposes is judged like everything else.
        tiers = (*tiers, (ExternalProposals(proposer_for(ctx, target)),))
    started = limits.elapsed()
    bound = initial.size

    def order(cand: Candidate):
        # The core takes strictly smaller costs only; a cost (blocks, loops, files) may
        # fall while the tokens grow.  No program with more tokens than the one the
        # search started from is a candidate at all: it is never tested, never accepted.
        return cand.order if cand.size <= bound else None

    outcome = reduce_to_fixpoint(
        initial, tiers, adapter.test, order, budget=limits, on_event=talk.emit,
        normalize=adapter.rebase, test_many=adapter.test_many, jobs=pool.plan.jobs, search=ctx.config.search,
    )
    placement = pool.runner.placement()
    if placement.lost:
        talk.note(f"the cluster lost workers during the search: {placement.lost_text()}")
    if len(outcome.history) == 1:
        limits.saw_result(start.wall)  # nothing accepted: the checks after it run the start
    return Searched(outcome, original_size, adapter.facts, adapter.data_files, tuple(adapter.trace), resumed,
                    seconds=limits.elapsed() - started, placement=placement)


def proposer_for(ctx: Context, target: Target) -> ShellProposer:
    """``--propose-with``'s command, run from where shrinkgpu was started."""
    return ShellProposer(ctx.config.propose_with, ctx.talk, ctx.limits, ctx.scratch.session / "proposer",
                         (ctx.config.cwd or Path.cwd()).resolve(), target.signature.headline)
