"""One reduction: ``Reduction.run`` reads like the phase table of docs/architecture.md.

Each phase is a function of values in a module of its own, returning a frozen value
the later phases take; none sets anything on another.  What every phase reads (the
config, the spec, the layout, the sandbox, ``Talk``, ``Limits``) is the ``Context``
``prepare`` makes.

    observe_original  -> Original     reducer/original.py
    target_of         -> Target       reducer/original.py
    fewest_ranks      -> Original     reducer/world.py (a distributed script: 1, then 2 ranks)
    build_program     -> Input        reducer/facts.py
    plan_workers      -> WorkerPlan   reducer/pool.py
    plan_extraction   -> Extracting   reducer/extraction.py
    start_point       -> Start        reducer/start.py (with the run that captures the call)
    finish_extraction -> Extracted    reducer/extraction.py
    open_pool         -> Pool         reducer/pool.py
    search            -> Searched     reducer/search.py
    check_result      -> Verified     reducer/verification.py
    ablate            -> Ablation     reducer/ablate.py
    without_ranks     -> Launch       reducer/world.py (a distributed result: plain python, if it can)
    self_contained    -> Alone        reducer/alone.py (which artifact runs alone)
    finish            -> ReductionResult  reducer/result.py

A new phase is one more module and one more line in ``phases``; a new way to run a
candidate is a new executor, passed as ``executors``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from shrinkgpu.layout import OutputLayout
from shrinkgpu.limits import Limits
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.ablate import ablate
from shrinkgpu.reducer.alone import self_contained
from shrinkgpu.reducer.config import ReduceConfig, ReduceError, compile_pattern, with_hash_seed
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.events import BestSoFar, Stage, Talk
from shrinkgpu.reducer.extraction import finish_extraction, plan_extraction
from shrinkgpu.reducer.facts import Input, build_program
from shrinkgpu.reducer.original import keep_original, note_how_it_ran, observe_original, target_of
from shrinkgpu.reducer.pool import Measured, Pool, open_pool, plan_workers
from shrinkgpu.reducer.result import Found, finish
from shrinkgpu.reducer.search import search
from shrinkgpu.reducer.setup import check_output, imported_files, main_source, spec_for
from shrinkgpu.reducer.start import Start, start_point
from shrinkgpu.reducer.stats import PassStats
from shrinkgpu.reducer.verification import check_result
from shrinkgpu.reducer.world import fewest_ranks, own_ranks, without_ranks
from shrinkgpu.report import CollectEnv, PartialWriter, git_revision
from shrinkgpu.results import ReductionResult
from shrinkgpu.signature import Target
from shrinkgpu.worker import ExecutorFactory, Sandbox, SandboxError, default_executor, sweep_stale_sessions


class Reduction:
    """A reduction of ``config``'s script; ``run()`` does it all.  ``on_event`` sees
    progress events (the core's and reducer/events.py's); ``executors`` makes the
    executor of an isolation (a fake one in tests of the phases)."""

    def __init__(
        self,
        config: ReduceConfig,
        on_event: Callable[[object], None] | None = None,
        *,
        executors: ExecutorFactory = default_executor,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.executors = executors
        self.stats = PassStats()
        self.talk = Talk([self.stats, *([on_event] if on_event else [])])
        # The one owner of time: --max-time's end, every run's limit, the pace (``clock``:
        # a fake one in the tests of the limits, with a fake executor that advances it).
        self.limits = Limits(max_time=config.max_time, max_tests=config.max_tests, timeout=config.timeout,
                             verify_runs=config.verify_runs, clock=clock)
        self.partial: PartialWriter | None = None
        self.versions: CollectEnv | None = None
        self.revision: str | None = None

    def run(self) -> ReductionResult:
        ctx = self.prepare()
        try:
            return self.phases(ctx)
        except BaseException:
            if self.partial is not None:
                self.partial.flush()  # whatever was found last, before the error or the signal
            raise
        finally:
            ctx.sandbox.close()
            if self.versions is not None:
                self.versions.close()

    def phases(self, ctx: Context) -> ReductionResult:
        original = observe_original(ctx)
        # Every later run sees what the first one settled (synchronous launches).
        settled = ctx.with_spec(original.first.spec)
        target = target_of(settled, original)
        keep_original(ctx, original)  # (keyed by the options as given: what --resume compares)
        user_first = original.observation  # (the user's world: which rank failed first there)
        ctx, original = fewest_ranks(own_ranks(settled, original), original, target)
        first = original.observation
        inp = build_program(ctx, first, target)
        note_how_it_ran(ctx, original.first)
        plan = plan_workers(ctx, first)
        extracting = plan_extraction(ctx, first, target)
        start, captured = start_point(ctx, first, target, inp, plan, extracting.capture)
        extracted = finish_extraction(ctx, extracting, target, first, captured)
        pool = open_pool(ctx, first, original.attempts, target, inp.files, measured(start, inp), plan)
        try:
            oracle = oracle_of(ctx, pool, target)
            searched = search(ctx, oracle, pool, inp, start, target, first.wall)
            originals = list(inp.files.values()) + (list(start.program.texts.values()) if start.program else [])
            verified = check_result(ctx, oracle, searched.outcome, target, originals,
                                    inp.program.initial() if start.program is not None else None)
            ablated = ablate(ctx, pool, verified, extracted, target, inp.main)
        finally:
            pool.close()
        launch = without_ranks(ctx, verified, target, inp.main)
        alone = self_contained(ctx, verified, extracted, target, verified.reads or (), launch.ranks)
        found = Found(original.first, target, inp, start, pool, oracle, searched, verified, extracted, ablated,
                      self.stats.to_json(), launch, user_first, alone)
        return finish(ctx, found, self.versions, self.revision)

    def prepare(self) -> Context:
        """The config checked, the spec and output layout, the output refused if it would
        overwrite one of the user's files, the listeners, one sandbox for every run."""
        config = with_hash_seed(self.config)
        pattern = compile_pattern(config.keep_error)
        spec = spec_for(config)
        layout = OutputLayout(Path(config.output).resolve()) if config.output else OutputLayout.beside(spec.script)
        check_output(
            layout, spec,
            [*([spec.script] if config.module is None else []), *imported_files(spec, config)],
        )
        if config.write:
            self.versions = CollectEnv(sys.executable, spec.env)
            self.revision = git_revision(spec.script.parent)
            # The best program so far is on disk at every moment: nothing is lost to an
            # interrupt, a SIGTERM or a crash.
            self.partial = partial = PartialWriter(layout)
            self.talk.listeners.insert(0,
                                       lambda e: partial.offer(e.files, e.main) if isinstance(e, BestSoFar) else None)
        stale = sweep_stale_sessions()
        if stale:
            size = sum(n for _, n in stale) / 1e6
            self.talk.emit(Stage(f"removed {len(stale)} temporary director{'y' if len(stale) == 1 else 'ies'} "
                                 f"({size:.1f} MB) left by earlier runs that were killed: {stale[0][0]}"
                                 + (" and others" if len(stale) > 1 else "")))
        try:
            # One copy of the user's directory serves every run of this reduction.
            sandbox = Sandbox(spec.root_dir, exclude=list(layout.ours()), stdin=spec.stdin, keep=config.keep_temp)
        except SandboxError as exc:
            if self.versions is not None:
                self.versions.close()
            raise ReduceError(str(exc), exit_code=2) from None
        main_text, input_notes = main_source(config, spec)
        for note in input_notes:
            self.talk.note(note)
        return Context(config, spec, layout, sandbox, self.talk, self.limits, self.executors, pattern, main_text)


def measured(start: Start, inp: Input) -> Measured:
    """What the pool measures the original's rate and time on: the program the search
    starts from."""
    if start.program is not None:
        return Measured(start.program.texts, start.what, start.wall)
    return Measured(inp.files, "the original", start.wall)


def oracle_of(ctx: Context, pool: Pool, target: Target) -> Oracle:
    contrast = pool.contrast
    return Oracle(
        pool.runner, target, ctx.limits,
        confirm=ctx.config.confirm_runs,
        gpus=pool.plan.gpus,
        rate=pool.rate.value,
        pin_variable=pool.plan.pin_variable,
        contrast=contrast.watch if contrast is not None else None,
        contrast_passes=contrast is not None and contrast.passes,
    )


def reduce(
    config: ReduceConfig,
    on_event: Callable[[object], None] | None = None,
    *,
    executors: ExecutorFactory = default_executor,
) -> ReductionResult:
    """Reduce ``config``'s script to a smaller one that fails with the same first error;
    write it (with ``config.write``) and return what happened."""
    return Reduction(config, on_event, executors=executors).run()
