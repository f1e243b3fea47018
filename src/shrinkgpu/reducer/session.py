"""One reduction as an object: its state on ``self``, each phase a short method that
returns a small frozen value, in this order (``Reduction.run``):

    prepare()                      the output refused or accepted, the sandbox, the listeners
    observe_original()  -> Original   the original in a fresh interpreter (synchronous
                                   launches for an asynchronous error; --confirm runs
                                   when a flaky one passed)
    target_of(...)      -> Target     the bug to keep, or NotReproduced
    build_program(...)  -> Program    its files and the facts of its run
    plan_workers(...)   -> WorkerPlan jobs, GPUs, threads per candidate
    before_search(...)  -> Extracted  the failing call alone, written now (from the first
                                   run, else one capture run); with a long original, the
                                   state at the failing iteration saved in that run and
                                   its replay checked in a fresh interpreter
    cut_start(...)                 a long original that no state replays: the direct call
                                   past the library, or the original without the loops
                                   that took its time, checked in a fresh interpreter;
                                   the search starts from the first that fails the same way
    start_workers(...)  -> PreloadReport
    measure_rate(...)   -> Rate       how often the original fails in fresh interpreters
    calibrate(...)      -> Calibration the original timed where candidates run, or fresh
    search(...)         -> Outcome    core.reduce_to_fixpoint over the passes; candidates
                                   judged by ``test_many``, each accepted one ``rebase``d
    verify(...)         -> Verified   the result in fresh interpreters, else a fallback
    finish(...)         -> ReductionResult, written with its report

Every run of a program goes through the runner's executor (worker/executors.py); the
ones after the workers start go through the oracle too, so they are counted.  A new
phase is a method called from ``run``; a new way to run a candidate is a new executor,
passed as ``executors``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from shrinkgpu import ablation
from shrinkgpu.core import Budget, Outcome, Verdict, reduce_to_fixpoint
from shrinkgpu.core.rates import describe_rate
from shrinkgpu.extract import (
    ExtractionFailed,
    capture_of,
    check_extracted,
    extract_record,
    raised_record,
    read_record,
)
from shrinkgpu.families import Family
from shrinkgpu.layout import OutputLayout
from shrinkgpu.oracle import Oracle
from shrinkgpu.passes import LOADING, PASSES, CallPastTheLibrary, CutHotLoops, DeleteNeverRan, ReplayFromState
from shrinkgpu.reducer.budget import HOT_MIN_SECONDS, RECOUNT_MAX_SECONDS, checks_reserve, hot_loops
from shrinkgpu.reducer.config import ReduceConfig, ReduceError, NotReproduced, compile_pattern, with_hash_seed
from shrinkgpu.reducer.facts import facts_of, library_cut, local_files, loop_around_failure, saved_objects
from shrinkgpu.reducer import kept_first
from shrinkgpu.reducer.first_run import FORK_ADVICE, FirstRun, run_observed, with_sync_launches
from shrinkgpu.reducer.setup import check_output, imported_files, main_source, missing_file_hint, spec_for
from shrinkgpu.reducer.state import STATE_MIN_SECONDS, StatePoint, describe_left, state_point, state_record
from shrinkgpu.reducer.stats import PassStats
from shrinkgpu.reducer.verification import run_where_written, verify_history, written_elsewhere
from shrinkgpu.reducer.workers import (
    FLAKY_LANES,
    FLAKY_SAMPLE,
    SLOW_ORIGINAL,
    WorkerPlan,
    calibrate,
    calibrated_timeout,
    pin_variable_for,
    plan_jobs,
    run_threads,
    runs,
)
from shrinkgpu.report import (
    BestSoFar,
    CollectEnv,
    PartialWriter,
    Reducing,
    Stage,
    git_revision,
    place_needed_files,
    read_partial,
    write_outputs,
)
from shrinkgpu.results import Ablation, Extraction, ReductionResult
from shrinkgpu.signature import Signature, Strictness, Target, varying_dims
from shrinkgpu.syntax import Candidate, Program, SizeRecord, StateRecord
from shrinkgpu.syntax.facts import loop_facts
from shrinkgpu.syntax.tidy import tidy
from shrinkgpu.worker import (
    ExecutorFactory,
    ForkUnavailable,
    Isolation,
    Observation,
    PreloadReport,
    Runner,
    Sandbox,
    SandboxError,
    Watch,
    cache_bytes,
    default_executor,
    preload_candidates,
    sweep_stale_sessions,
    usable_cpus,
)
from shrinkgpu.worker.devices import visible_gpus


ORIGINAL_HEARTBEAT = 30.0  # seconds between "still running" lines while the original runs
# A start from the saved state that takes more than this share of the original's run
# skips too little to be worth the file it loads.
SLOWER_REPLAY = 0.7
# The cuts a long original with no replayable state is started from (cut_start), in order:
# (preparation, cut, what it is).  The preparation's first unit, when it offers one, goes
# first: a statement after the failure (``trainer.save_model(...)``) reads the trainer too
# and would keep it alive when the library's call is made directly.
START_CUTS = (
    (DeleteNeverRan(), CallPastTheLibrary(), "the library's call into your code made directly"),
    (None, CutHotLoops(), "the loops that took its time cut"),
)
# The first of them, the only one that needs no step before the failure: tried before
# the run that would save the state (before_search).
LIBRARY_START = START_CUTS[:1]
EXTRACT_CHECK_MAX = 300.0  # seconds an extracted call's check may take (an import and one call)


@dataclass(frozen=True)
class Original:
    """The original's first run as the reduction keeps it, and every fresh run made
    before it (a flaky original may pass the first time)."""

    first: FirstRun
    attempts: tuple[Observation, ...]


@dataclass(frozen=True)
class Rate:
    """How often the original failed with its first error in fresh interpreters."""

    reproduced: int
    runs: int

    @property
    def value(self) -> float:
        return self.reproduced / self.runs


@dataclass(frozen=True)
class Calibration:
    walls: tuple[float, ...]  # the original's run times where candidates run
    timeout: float  # a candidate's limit
    fresh_timeout: float  # a fresh interpreter's limit (it pays for its imports again)


@dataclass(frozen=True)
class Verified:
    best: Candidate
    counts: tuple[int, int]  # (reproduced, runs) in fresh interpreters
    signature: Signature | None  # a reproducing fresh run's first error
    stopped: str | None  # why the reduction ended early, if it did


@dataclass(frozen=True)
class Extracted:
    extraction: Extraction | None
    error: str | None  # why there is none


# Errors raised from the tensors' metadata (dtype, shape, strides, device) before any
# value is read: a tensor of the same metadata with other values raises the same one.
METADATA_FAMILIES = frozenset({Family.SHAPE, Family.VIEW, Family.DTYPE, Family.DEVICE_MISMATCH,
                               Family.MISSING_KERNEL})


class Reduction:
    """A reduction of ``config``'s script; ``run()`` does it all (see the module's
    docstring for the phases).  ``on_event`` sees progress events (the core's and
    ``report.progress``'s); ``executors`` makes the executor of an isolation (a fake
    one in tests of the phases)."""

    def __init__(
        self,
        config: ReduceConfig,
        on_event: Callable[[object], None] | None = None,
        *,
        executors: ExecutorFactory = default_executor,
    ):
        self.started = time.monotonic()
        self.config = config
        self.executors = executors
        self.stats = PassStats()
        self.listeners: list[Callable[[object], None]] = [self.stats, *([on_event] if on_event else [])]
        self.notes: list[str] = []
        self.trace: list[tuple[float, int]] = []
        self.deadline = None if config.max_time is None else self.started + config.max_time
        self.versions: CollectEnv | None = None
        self.revision: str | None = None
        self.partial: PartialWriter | None = None
        self.sandbox: Sandbox | None = None
        self.runner: Runner | None = None
        self.oracle: Oracle | None = None
        self.budget = Budget()
        self.data_files: dict[str, Path] = {}
        self._recordings = itertools.count(1)
        # How often a long run of the original says it is still going.
        self.heartbeat = ORIGINAL_HEARTBEAT
        # The state at the failing step, and the program started there, once checked
        # (before_search); the search starts from that program.
        self.state: StateRecord | None = None
        self.sizes: tuple[SizeRecord, ...] = ()  # the first run's (build_program)
        self.replay: Program | None = None
        self.replay_wall = 0.0
        # what the program the search starts from is, when it is not the original
        self.start_what = "the program started at the failing step"
        self.cuts_tried: set[str] = set()  # cut_start's, by what they are: each is checked once

    # -- talking -------------------------------------------------------------------
    def emit(self, event: object) -> None:
        for listener in self.listeners:
            listener(event)

    def note(self, message: str, *, show: bool = True) -> None:
        """A fact for the report's notes; ``show``: the user sees it now too (progress)."""
        self.notes.append(message)
        if show:
            self.emit(Stage(message))

    def left(self) -> float | None:
        """Seconds left of --max-time, which bounds the whole run, first run included."""
        return None if self.deadline is None else max(0.1, self.deadline - time.monotonic())

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    # -- the whole run ---------------------------------------------------------------
    def run(self) -> ReductionResult:
        self.prepare()
        try:
            return self._phases()
        except BaseException:
            if self.partial is not None:
                self.partial.flush()  # whatever was found last, before the error or the signal
            raise
        finally:
            self.sandbox.close()
            if self.versions is not None:
                self.versions.close()

    def _phases(self) -> ReductionResult:
        original = self.observe_original()
        # Every later run sees what the first one settled (synchronous launches).
        self.spec = original.first.spec
        first = original.first.observation
        self.target = self.target_of(original)
        self.keep_first(original)
        self.program = self.build_program(first)
        self.note_how_it_ran(original.first)
        self.plan = self.plan_workers(first)
        extracted = self.before_search(first)
        self.cut_start(first)
        self.runner = self.new_runner(self.config.isolation or Isolation.FORK)
        try:
            self.preload = self.start_workers(first)
            rate = self.measure_rate(first, original.attempts)
            calibration = self.calibrate(first, rate)
            self.calibration = calibration
            self.oracle = Oracle(
                self.runner, self.target, calibration.timeout,
                fresh_timeout=calibration.fresh_timeout,
                confirm=self.config.confirm_runs,
                gpus=self.plan.gpus,
                rate=rate.value,
                pin_variable=self.plan.pin_variable,
                contrast=(contrast := self.eager_contrast()),
                contrast_passes=contrast is not None and self.eager_passes,
            )
            outcome = self.search(first)
            verified = self.verify(outcome)
            ablated = self.ablate(verified, extracted)
        finally:
            self.runner.close()
        return self.finish(original.first, rate, calibration, outcome, verified, extracted, ablated)

    # -- before any work ---------------------------------------------------------------
    def prepare(self) -> None:
        """The config checked, the spec and output layout, the output refused if it would
        overwrite one of the user's files, the listeners, one sandbox for every run."""
        config = self.config
        self.pattern = compile_pattern(config.keep_error)
        self.config = config = with_hash_seed(config)
        self.spec = spec = spec_for(config)
        self.layout = OutputLayout(Path(config.output).resolve()) if config.output else OutputLayout.beside(spec.script)
        check_output(
            self.layout, spec,
            [*([Path(config.script).resolve()] if config.module is None else []), *imported_files(spec, config)],
        )
        if config.write:
            self.versions = CollectEnv(sys.executable, spec.env)
            self.revision = git_revision(spec.script.parent)
            # The best program so far is on disk at every moment: nothing is lost to an
            # interrupt, a SIGTERM or a crash.
            self.partial = PartialWriter(self.layout)
            self.listeners.insert(0, self.partial)
        stale = sweep_stale_sessions()
        if stale:
            size = sum(n for _, n in stale) / 1e6
            self.emit(Stage(f"removed {len(stale)} temporary director{'y' if len(stale) == 1 else 'ies'} "
                            f"({size:.1f} MB) left by earlier runs that were killed: {stale[0][0]}"
                            + (" and others" if len(stale) > 1 else "")))
        try:
            # One copy of the user's directory serves every run of this reduction.
            self.sandbox = Sandbox(spec.root_dir, exclude=list(self.layout.ours()), stdin=spec.stdin,
                                   keep=config.keep_temp)
        except SandboxError as exc:
            if self.versions is not None:
                self.versions.close()
            raise ReduceError(str(exc), exit_code=2) from None

    # -- the original --------------------------------------------------------------------
    def observe_original(self) -> Original:
        config = self.config
        self.main_text, input_notes = main_source(config, self.spec)
        for note in input_notes:
            self.note(note)
        self.saved_call = self.sandbox.session / "call.pt"
        # The first run also counts loop iterations (the user's files compiled with a counter).
        watch = Watch(
            collect_modules=True, collect_env=True, count_loops=True, op_shapes=True,
            cut=str(self.saved_call) if config.cut_library else None,
            save_objects=str(self.sandbox.session / "objects") if config.save_objects else None,
            # a helper's results serve a start from the saved state, which only a run
            # this long gets
            save_results_after=STATE_MIN_SECONDS if config.replay_state and config.write else None,
            keep_raised=str(self.sandbox.session / "raised") if config.extract and config.write else None,
            sizes=config.observed_sizes,
        )

        def still_running(elapsed: float) -> None:
            minutes, seconds = divmod(int(elapsed), 60)
            self.emit(Stage(f"the original is still running ({minutes}:{seconds:02d}); its first error is what "
                            "every candidate is judged against"))

        def observe() -> FirstRun:
            return run_observed(config, isolation=Isolation.FRESH, watch=watch, sandbox=self.sandbox,
                                limit=self.left(), executors=self.executors,
                                waiting=(self.heartbeat, still_running))

        if config.resume:
            kept = self.kept_first()
            if kept is not None:
                return kept
        self.emit(Stage("running the original in a fresh interpreter"))
        first = observe()
        attempts = [first.observation]
        # A flaky script may pass the first time: the --confirm runs may find its failure.
        while (
            attempts[-1].signature is None
            and not attempts[-1].infra_error
            and not attempts[-1].timed_out
            and len(attempts) <= config.confirm
        ):
            self.emit(Stage(f"the original did not fail (run {len(attempts)}); running it again (--confirm)"))
            first = observe()
            attempts.append(first.observation)
        return Original(first, tuple(attempts))

    def first_key(self, original: Original) -> str:
        return kept_first.key_of(self.config, self.spec, self.main_text, original.first.observation.modules)

    def kept_first(self) -> Original | None:
        """--resume: the first run an earlier run of this reduction kept, when the program
        and the options are the same; it is not run again."""
        where = self.layout.first_run
        kept, why = kept_first.load(where, self.sandbox.session, self.first_key)
        if why is not None:
            self.note(f"--resume: {why}")
        if kept is None:
            return None
        first = kept.first
        # The options of this run, with what the kept one settled (synchronous launches).
        config = with_sync_launches(self.config, first.observation.environment)[0] if first.launch else self.config
        # and the environment of this run: the kept spec has the one the earlier run had
        kept = dataclasses.replace(kept, first=dataclasses.replace(first, config=config, spec=spec_for(config)))
        self.emit(Stage(f"--resume: the original's first run ({first.observation.wall:.0f}s, "
                        f"{first.observation.describe()}) is kept in {where.name}/: not run again"))
        return kept

    def keep_first(self, original: Original) -> None:
        """A long first run, kept beside the output once it is the bug to keep, so that an
        interrupted reduction resumed with --resume does not repeat it."""
        if not self.config.write or original.first.observation.wall < kept_first.KEEP_MIN_SECONDS:
            return
        try:
            kept_first.save(self.layout.first_run, original, self.sandbox.session, self.first_key(original))
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
            self.note(f"the first run could not be kept for --resume ({type(exc).__name__}: {exc})", show=False)
            return
        self.emit(Stage(f"the original's first run is kept in {self.layout.first_run.name}/: --resume will not "
                        "run it again"))

    def target_of(self, original: Original) -> Target:
        """The bug to keep; ``NotReproduced`` (exit 3) when the original did not fail as
        asked, ``ReduceError`` when it could not run."""
        first, config = original.first.observation, self.config
        if first.infra_error:
            raise ReduceError(f"could not run the script: {first.infra_error}")
        if first.timed_out:
            bound = "--max-time" if self.deadline is not None and first.wall >= (config.max_time or 0) - 1 else "--timeout"
            raise NotReproduced(
                f"the original did not finish within {first.wall:.0f}s ({bound}); a script that runs longer needs "
                f"a larger --timeout (and --max-time), or a cut of its own that fails sooner",
                first,
            )
        if first.signature is None:
            runs_made = f" in {len(original.attempts)} runs" if len(original.attempts) > 1 else ""
            raise NotReproduced(f"the script did not fail{runs_made}: {first.describe()}", first)
        sig = first.signature
        free = varying_dims(sig.op, first.op_shapes.get(sig.op.name, {})) if sig.op is not None else frozenset()
        target = Target(sig, self.pattern, config.strictness, config.family, free)
        why = target.mismatch(first.signature)
        if why == "keep-error":
            raise NotReproduced(
                f"the first error does not match --keep-error {self.pattern.pattern!r}:\n{first.signature.describe()}"
                + missing_file_hint(first.signature, self.spec),
                first,
            )
        if why == "family":
            raise NotReproduced(
                f"the first error is not of the family {config.family.key!r} ({config.family.value}):\n"
                f"{first.signature.describe()}",
                first,
            )
        if free:
            seen = first.op_shapes.get(sig.op.name, {})
            parts = []
            for path, dim in sorted(free):
                sizes = sorted({shape[dim] for shape in seen.get(path, ()) if len(shape) > dim})
                shown = ", ".join(map(str, sizes[:6])) + (", ..." if len(sizes) > 6 else "")
                parts.append(f"dimension {dim} of {path} ({shown})")
            self.note(
                f"across the original's calls of {sig.op.name}, " + "; ".join(parts) + " took several sizes: "
                "the program varies them (a sequence a loop grows, a short last batch), so a candidate that fails "
                "the same way with another size there is the same bug; every other dimension stays strict"
            )
        return target

    def build_program(self, first: Observation) -> Program:
        """The program (the script and the local modules its run imported) with the facts
        of its first run: loops, the library cut, the data objects saved, hot loops."""
        spec = self.spec
        files = local_files(first, spec, self.main_text)
        # Now that the run showed which files are the program's and which it reads, none of
        # them may be the output.
        check_output(self.layout, spec, [spec.root_dir / rel for rel in (*files, *first.reads)])
        self.files = files
        self.loops = loop_facts(files, first.loops)
        self.cut, self.data_files = library_cut(first, spec, self.sandbox, self.saved_call, files)
        self.saved_objects, object_files = saved_objects(first, spec, self.sandbox, self.layout)
        self.data_files.update(object_files)
        self.hot = hot_loops(files, first.loop_time) if first.wall >= HOT_MIN_SECONDS else ()
        facts = dataclasses.replace(
            facts_of(first), loops=self.loops, cut=self.cut, hot_loops=self.hot, saved_objects=self.saved_objects
        )
        # Only the first run evaluates the failing frames' sizes; every later program
        # carries them (by text: the expressions stay while the program shrinks).
        # A tensor drawn afresh keeps its dtype, shape, strides and device, not its
        # values: offered only for errors those alone raise.
        target = getattr(self, "target", None)
        metadata = target is not None and target.signature.family in METADATA_FAMILIES
        self.sizes = tuple(s for s in facts.sizes if s.kind != "tensor" or metadata)
        facts = dataclasses.replace(facts, sizes=self.sizes)
        return Program(files, spec.script_rel, facts=facts)

    def note_how_it_ran(self, first: FirstRun) -> None:
        """What the report must say about how the original was run."""
        launch = first.launch
        if first.surfaced is not None:
            where = first.surfaced.op.name if first.surfaced.op else "a call that is not torch's"
            self.note(
                f"the first error was asynchronous: without synchronous launches it surfaced at {where}; the "
                f"original was run again with {launch[0]}={launch[1]}, which put it at the operator whose kernel "
                "failed, and every candidate ran that way (timings under it say nothing about speed)",
                show=False,
            )
        elif launch is not None:
            self.note(
                f"kernel launches were synchronous ({launch[0]}={launch[1]}) for the original and every "
                "candidate: the first error is where the failing kernel was launched",
                show=False,
            )
        if first.note:
            self.note(first.note, show=False)
        if self.spec.cwd_rel is None:
            # No absolute paths in what goes to a maintainer (field guide, rule 8).
            self.note(
                "the working directory was outside the script's directory (--root); candidates ran "
                "in a copy of the script's directory as their working directory",
                show=False,
            )

    # -- the workers ----------------------------------------------------------------------
    def plan_workers(self, first: Observation) -> WorkerPlan:
        config, spec = self.config, self.spec
        gpus = tuple(config.gpus if config.gpus is not None else visible_gpus(spec.env))
        cores = usable_cpus()
        per_run = run_threads(first.environment)
        jobs, threads = plan_jobs(config.jobs, len(gpus), cores, per_run)
        if gpus and first.signature.family is Family.OUT_OF_MEMORY and jobs > len(gpus):
            # Two candidates on one device would each see the other's memory.
            jobs = len(gpus)
            self.note(f"out of memory: {jobs} candidate(s) at once, one per GPU, never two on one device")
        if threads is not None:
            self.note(
                f"{jobs} candidates at once on {cores} CPU cores: each runs with {threads} thread(s) where "
                f"python would use {per_run} (-j {max(1, cores // per_run)} keeps {per_run})"
            )
        return WorkerPlan(gpus, pin_variable_for(spec.env, first.environment), jobs, threads, cores, per_run)

    def new_runner(self, isolation: Isolation, lanes: int = 1) -> Runner:
        return Runner(
            self.spec, program_files=self.files, isolation=isolation, keep_temp=self.config.keep_temp,
            sandbox=self.sandbox, threads=self.plan.threads, lanes=lanes, executors=self.executors,
        )

    def start(self, runner: Runner) -> PreloadReport:
        try:
            return runner.start(self.modules, required=self.config.isolation is Isolation.FORK)
        except ForkUnavailable as exc:
            raise ReduceError(f"--isolation fork is not possible here: {exc.reason}. {FORK_ADVICE}") from None

    def start_workers(self, first: Observation) -> PreloadReport:
        """The fork server, preloaded with the installed modules the original imported
        (or fresh interpreters), and what the user must know about it."""
        fork = self.runner.isolation is Isolation.FORK
        self.emit(Stage("starting workers" + (" and preloading modules" if fork else "")))
        self.modules = preload_candidates(first.modules, [self.spec.root_dir])
        report = self.start(self.runner)
        if report.isolation is Isolation.FORK:
            self.emit(Stage(f"fork server ready: {len(report.modules)} modules preloaded in {report.seconds:.1f}s"))
        if report.dropped:
            self.note(
                "not preloaded, because forking after importing them is unsafe (each candidate imports "
                "them itself, which is slower): " + "; ".join(report.dropped)
            )
        if report.note:
            self.note(f"{report.note}: expect seconds per candidate instead of milliseconds. {FORK_ADVICE}")
        imported = {name for name, _file, _local in first.modules}
        if report.isolation is Isolation.FORK and "torch" in imported and "torch" not in report.modules:
            # Forking still works, but every candidate pays torch's import: a fallback in
            # all but name, and it must not be a silent one.
            torch_file = next((f for n, f, _ in first.modules if n == "torch"), None)
            # A preload candidate the server did not keep was dropped (the line above says why).
            why = ("Importing it made forking unsafe here (above): a module or an import hook that starts "
                   "threads when torch is imported is the usual cause." if "torch" in self.modules else
                   "It is preloaded when it is installed (site-packages), not one of your files.")
            self.note(f"torch ({torch_file}) is not preloaded: each candidate imports it itself (seconds instead "
                      f"of milliseconds). {why}")
        return report

    def measure_rate(self, first: Observation, attempts: tuple[Observation, ...]) -> Rate:
        """How often the original fails, run as python runs it (a fresh interpreter: new
        random seeds, a new hash seed each time).  A result must fail as reliably."""
        config, target, plan = self.config, self.target, self.plan
        fresh_limit = calibrated_timeout([first.wall])
        confirmed = list(attempts)
        more = config.confirm - (len(attempts) - 1)
        # Started from the saved state, the search judges candidates of the replay: its
        # rate is the one they are measured against, and its runs take seconds where the
        # original's took minutes.
        files, what = (self.replay.texts, self.start_what) if self.replay else (self.files, "the original")
        if more > 0:
            self.emit(Stage(f"running {what} {more} more time(s) in fresh interpreters"))
            confirmed += runs(self.runner, files, more, plan.jobs, Isolation.FRESH, fresh_limit,
                              plan.first_device)
        if config.confirm > 0 and not all(target.matches(o.signature) for o in confirmed):
            if len(confirmed) < FLAKY_SAMPLE:
                self.emit(Stage("the original does not fail every time: measuring how often"))
                confirmed += runs(self.runner, files, FLAKY_SAMPLE - len(confirmed), plan.jobs,
                                  Isolation.FRESH, fresh_limit, plan.first_device)
        rate = Rate(sum(target.matches(o.signature) for o in confirmed), len(confirmed))
        if rate.value < 1.0:
            others = sorted({o.describe() for o in confirmed if not target.matches(o.signature)})
            self.note(
                f"{what} reproduced in {describe_rate(rate.reproduced, rate.runs)} in fresh interpreters "
                "(otherwise: " + "; ".join(others[:3]) + "); each candidate is judged by a sequential test of its "
                "own rate against that one"
            )
            if self.runner.isolation is Isolation.FORK and self.runner.lanes == 1 and FLAKY_LANES > 1:
                self.runner.close()
                self.runner = self.new_runner(Isolation.FORK, lanes=FLAKY_LANES)
                self.start(self.runner)
                if self.runner.lanes > 1:
                    self.emit(Stage(f"{self.runner.lanes} fork servers with different hash seeds, taken in turn"))
        return rate

    def calibrate(self, first: Observation, rate: Rate) -> Calibration:
        """Time the original where candidates will run, pinned as they will be: the same
        bug (at the same rate), or forking (or pinning) is not faithful here and every
        candidate runs fresh (or sees every GPU)."""
        files, wall = (self.replay.texts, self.replay_wall) if self.replay else (self.files, first.wall)
        walls = [wall]
        if self.runner.isolation is Isolation.FORK:
            slow = wall >= SLOW_ORIGINAL
            pin = self.plan.first_device
            fill = self.runner.sandbox.session / "compile-caches" if rate.value >= 1.0 else None
            walls, why = calibrate(self.runner, files, self.target, rate.value, pin, slow, fill)
            if self.runner.warm_caches is not None:
                walls, why = self.check_warm_caches(files, rate, walls, why, slow)
            if why is not None and pin:
                unpinned, why_unpinned = calibrate(self.runner, files, self.target, rate.value, {}, slow)
                if why_unpinned is None:
                    self.note(
                        f"pinned to one GPU the original failed differently ({why}); the script needs more "
                        "devices than one, so candidates see every GPU, one at a time"
                    )
                    self.plan = dataclasses.replace(self.plan, gpus=(), jobs=1)
                    walls, why = unpinned, None
            if why is not None:
                if self.config.isolation is Isolation.FORK:
                    raise ReduceError(f"--isolation fork is not faithful for this script: {why}")
                self.note(f"{why}; every candidate runs in a fresh interpreter, which is slower")
                self.runner.close()
                self.runner = self.new_runner(Isolation.FRESH, lanes=self.runner.lanes)
                self.runner.start()
                walls = [wall]
        timeout = self.config.timeout or calibrated_timeout(walls)
        return Calibration(tuple(walls), timeout, calibrated_timeout([first.wall]))

    def check_warm_caches(self, files, rate: Rate, walls: list[float], why: str | None,
                          slow: bool) -> tuple[list[float], str | None]:
        """The original's first calibration run compiled, and left its caches for the
        runs after it (``calibrate``'s ``fill``): candidates start with a copy only if the
        original fails the same way with them.  Compiling is most of a short compiled
        script's run (Inductor's code generation and C++ or Triton builds), and a
        candidate that keeps the failing graph finds it already built."""
        pin = self.plan.first_device
        if why is None and slow:
            # the one run of a slow original filled them: one more says what they do
            check = self.runner.run(files, timeout=calibrated_timeout(walls), env=pin)
            if not self.target.matches(check.signature):
                why = f"the original failed differently in a forked worker ({check.describe()})"
            else:
                walls = [*walls, check.wall]
        if why is not None:
            # Forking or the caches: the original runs again where candidates run, compiling
            # from nothing each time, and what it does then decides.
            self.runner.warm_caches = None
            cold, cold_why = calibrate(self.runner, files, self.target, rate.value, pin, slow)
            if cold_why is None:
                self.note(f"{why}, when it started with torch.compile's caches from an earlier run of it: every "
                          "candidate compiles from nothing")
            return cold, cold_why
        self.note(
            f"torch.compile's caches from a run of the original ({cache_bytes(self.runner.warm_caches) / 2**20:.1f} MiB) "
            f"are copied into each candidate's directory: with them the original ran in {min(walls[1:]):.1f}s, "
            f"without them in {walls[0]:.1f}s"
        )
        return walls, None

    def eager_contrast(self) -> Watch | None:
        """For a torch.compile failure, the run that tells the compiler's bug from the
        program's: the original once with its compiled code run eagerly.  When that does
        not fail the same way, every candidate that reproduces is run that way too, and
        one that still fails alike is another bug (``Oracle.contrast``)."""
        if self.target.signature.family is not Family.COMPILE:
            return None
        files = self.replay.texts if self.replay else self.files
        watch = Watch(eager=True)
        # Eagerly the original runs on where compiling failed at once (the training after
        # it): it gets the limit of a whole run, not a candidate's.
        limit = max(self.calibration.timeout, self.calibration.fresh_timeout)
        obs = self.runner.run(files, timeout=limit, env=self.plan.first_device, watch=watch)
        if obs.timed_out or obs.infra_error:
            self.note(f"with its compiled code run eagerly the original did not end within {limit:.0f}s: candidates "
                      "are not asked to need the compiler")
            return None
        if self.target.matches(obs.signature):
            self.note("the original fails the same way with its compiled code run eagerly: candidates are not "
                      "asked to need the compiler")
            return None
        self.eager_passes = obs.signature is None and obs.exit_code == 0
        if self.eager_passes:
            self.note("with its compiled code run eagerly the original passes: a candidate must not fail that way "
                      "either, or its failure is a mistake of its own code, not the compiler's")
        else:
            self.note(f"with its compiled code run eagerly the original fails with {obs.signature.headline if obs.signature else obs.status}: "
                      "a candidate that fails the same way eagerly too is another bug")
        return watch

    # -- the search ------------------------------------------------------------------------
    def search_deadline(self, result_wall: float) -> float | None:
        """When the search must stop so that --max-time leaves the final checks and the
        extraction what they take (``checks_reserve``)."""
        if self.deadline is None:
            return None
        extracting = False  # done before the search (before_search)
        return self.deadline - checks_reserve(
            self.config.verify_runs, extracting, self.original_wall, result_wall, self.preload.seconds
        )

    def search(self, first: Observation) -> Outcome:
        self.original_wall = first.wall
        # Before any candidate ran, the result is expected to take what the original took
        # outside its hot loops: they go first, and keeping four runs of a slow original
        # back would leave the search no time to cut them (the deadline follows the real
        # run times from the first reproducing candidate on).
        expected_wall = first.wall * (1.0 - max((share for _, _, share in self.hot), default=0.0))
        self.budget = Budget(max_tests=self.config.max_tests, deadline=self.search_deadline(expected_wall))
        initial = self.program.initial()
        self.original_size = initial.size
        if self.replay is not None:
            # Every candidate then skips the iterations before the failing one.
            initial = self.replay.initial()
            if self.state is not None:
                self.note(f"the search starts at the failing step, from the saved state ({initial.size} tokens)")
            else:
                self.note(f"the search starts from {self.start_what} ({initial.size} tokens)")
            self.follow_timeout(self.replay_wall)
        if self.config.resume:
            resumed = self.resume_from()
            if isinstance(resumed, str):
                self.note(resumed)
            else:
                self.note(f"resumed from the partial result at {self.layout.output.name} ({resumed.size} tokens)")
                initial = resumed
        modules = sorted(p for p in self.program.texts if p.endswith(".py"))
        if self.config.output is not None and len(modules) > 1 and self.layout.output.suffix == ".py":
            self.note(
                f"the program is {len(modules)} files ({', '.join(modules)}): if the result still needs more than "
                f"one, it is written as the directory {self.layout.directory.name}/ beside "
                f"{self.layout.output.name}, and nothing is left at {self.layout.output.name}"
            )
        self.emit(Stage(f"reducing {initial.size} tokens (timeout {self.oracle.timeout:.1f}s per candidate)"))
        self.emit(Reducing(dict(initial.files), self.program.main, initial.size))
        self.trace.append((round(time.monotonic() - self.started, 3), initial.size))
        tiers = PASSES
        if self.state is not None and self.replay is not None and self.saved_objects:
            # Started at the failing step, a candidate still builds the data the step
            # reads before it restores the state (a synthesised dataset, a click log),
            # and that is most of its run: loading them goes first.  The result loads
            # the state's file already; a pickled dataset beside it hides no more.
            tiers = (LOADING, *(t for t in PASSES if t is not LOADING))
            self.note("started from the saved state: the data objects the first run saved are loaded first, "
                      "instead of built", show=False)
        return reduce_to_fixpoint(
            initial, tiers, self.test, lambda c: c.order, budget=self.budget, on_event=self.emit,
            normalize=self.rebase, test_many=self.test_many, jobs=self.plan.jobs, search=self.config.search,
        )

    def test(self, cand: Candidate) -> Verdict:
        return self.test_many([cand])[0]

    def test_many(self, cands: list[Candidate]) -> list[Verdict]:
        rendered: list = []
        for cand in cands:
            try:
                rendered.append(cand.files)
            except Exception:  # an edit combination libcst cannot render
                rendered.append(None)
        runnable = [files for files in rendered if files is not None]
        verdicts = iter(self.oracle.many(runnable)) if runnable else iter(())
        out = [Verdict.INVALID if files is None else next(verdicts) for files in rendered]
        if self.deadline is not None:
            # A reproducing candidate is what the search keeps: the time kept for the
            # final checks follows its run at once, not only when the pass ends.
            for files, verdict in zip(rendered, out):
                seen = self.oracle.reproduction(files) if verdict == Verdict.REPRODUCED else None
                if seen is not None:
                    self.budget.deadline = self.search_deadline(seen.wall)
        return out

    def budget_left(self) -> bool:
        """Whether the search may still spend a run (--max-tests, and its deadline)."""
        budget = self.budget
        if budget.max_tests is not None and self.stats.tested >= budget.max_tests:
            return False
        return budget.deadline is None or time.monotonic() < budget.deadline

    def rebase(self, cand: Candidate) -> Candidate:
        """The accepted candidate becomes the new original: fresh statement ids and
        dependencies for its own text, and the facts of its own run."""
        if not cand.edits:
            return cand
        files, main = cand.files, self.program.main
        self.emit(BestSoFar(dict(files), main, cand.size))
        self.trace.append((round(time.monotonic() - self.started, 3), cand.size))
        seen = self.oracle.reproduction(files)
        if seen is not None:
            self.follow_timeout(seen.wall)
        facts = facts_of(seen)
        # A loop stays worth cutting first while runs are still long.
        still_slow = seen is None or seen.wall >= HOT_MIN_SECONDS
        carried = dict(loops=self.loops, cut=self.cut, hot_loops=self.hot if still_slow else (),
                       saved_objects=self.saved_objects, state=self.state, sizes=self.sizes)
        rebased = Program(files, main, facts=dataclasses.replace(facts, **carried))
        quick = seen is not None and seen.wall <= RECOUNT_MAX_SECONDS
        short = seen is None or seen.wall <= RECOUNT_MAX_SECONDS  # (no run seen: a cache hit)
        # The objects as this program builds them, not as the original did: the code
        # after them has been reduced against this program's data, and a load of the
        # original's object would often no longer fail the same way.  At every
        # rebase, so the file beside the program is never a stale one.
        # A helper's result is offered only to a program started from the saved state.
        offered = [o for o in self.saved_objects if not o.targets or self.state is not None]
        save = short and offered and not all(any(o.file in t for t in files.values()) for o in offered)
        # Shrinking the data moves the failing item: count again, on this program (one
        # more run: only while runs are short, or it costs more than it saves).
        count = quick and rebased.loop_iterations and loop_around_failure(rebased)
        if (save or count) and self.budget_left():
            # One run for both: the same program, observed once.
            watch = Watch(
                count_loops=bool(count),
                save_objects=str(self.sandbox.session / f"objects-{next(self._recordings)}") if save else None,
                save_results_after=0.0 if save and self.state is not None else None,
            )
            again = self.oracle.observe(files, timeout=self.calibration.timeout, watch=watch)
            if self.budget.max_tests is not None:
                # one budget for every run the oracle makes: this one is a test the search
                # will not make (--max-tests bounds them all)
                self.budget.max_tests -= 1
            if self.target.matches(again.signature):
                if count:
                    carried["loops"] = loop_facts(files, again.loops)
                fresh, fresh_files = (
                    saved_objects(again, self.spec, self.sandbox, self.layout) if save else ((), {})
                )
                if fresh:
                    # A loaded object is not saved again (its statement is no longer the
                    # helper's call): its record stays while the program reads its file.
                    names = {o.file for o in fresh}
                    fresh = (*fresh, *(o for o in self.saved_objects if o.file not in names
                                       and any(o.file in t for t in files.values())))
                    self.saved_objects = fresh
                    self.data_files.update(fresh_files)
                    carried["saved_objects"] = fresh
                rebased = Program(files, main, facts=dataclasses.replace(facts, **carried))
        return rebased.initial()

    def follow_timeout(self, wall: float) -> None:
        """A candidate's limit follows the program it was cut from, not the original: one
        derived from a program that runs 2 s (its training loop cut, or started at the
        failing step) gets what that one takes, times the same margin, never more than
        the original's limit; a --timeout the user gave stays."""
        if self.config.timeout is not None:
            return
        limit = min(self.calibration.timeout, calibrated_timeout([wall]))
        if limit < self.oracle.timeout / 2:
            self.emit(Stage(f"candidates now time out after {limit:.1f}s (the program they are cut from runs "
                            f"{wall:.1f}s; the original {self.original_wall:.1f}s)"))
            self.oracle.timeout = limit

    def state_fact(self, best: Candidate) -> dict | None:
        """What the report says of the state file, when the result loads it."""
        record = self.state
        if record is None or not any(record.state_file in text for text in best.files.values()):
            return None
        path = self.data_files.get(record.state_file)
        return {
            "file": record.state_file, "loop": record.header, "in": record.file, "iteration": record.iteration,
            "restores": [expr for expr, _kind in record.entries], "rng": list(record.rng),
            "bytes": path.stat().st_size if path is not None and path.is_file() else 0,
            # the files the run wrote before that iteration, when the result puts them back
            "files_dir": record.files_dir if record.files_dir and any(
                record.files_dir in text for text in best.files.values()) else None,
        }

    def resume_from(self) -> Candidate | str:
        """The partial result at the output as the starting point, when it still
        reproduces; else a sentence saying why not."""
        output = self.layout.output
        files = read_partial(self.layout, self.program.main)
        if files is None:
            return f"--resume: no partial result at {output}; starting from the original"
        obs = self.oracle.observe(files, timeout=self.calibration.timeout, watch=Watch(count_loops=True))
        if not self.target.matches(obs.signature):
            return (f"--resume: the partial result at {output.name} no longer reproduces ({obs.describe()}); "
                    "starting from the original")
        facts = dataclasses.replace(facts_of(obs), loops=loop_facts(files, obs.loops) or self.loops,
                                    hot_loops=self.hot, state=self.state, sizes=self.sizes)
        return Program(files, self.program.main, facts=facts).initial()

    # -- after the search -------------------------------------------------------------------
    def verify(self, outcome: Outcome) -> Verified:
        runs_asked = self.config.verify_runs
        if outcome.stopped == "interrupted" and runs_asked:
            # The user wants out: write what we have now, and say it was not re-checked.
            self.note("interrupted: the result was not re-checked in fresh interpreters", show=False)
            runs_asked = 0
        elif self.out_of_time() and runs_asked:
            self.note(f"--max-time was reached: the result was not re-checked in fresh interpreters ({runs_asked} "
                      "asked by --verify); it is written marked partial")
            runs_asked = 0
        else:
            self.emit(Stage("verifying the result in fresh interpreters"))
        history = self.no_larger(outcome.history)
        tidied = self.tidied(history[-1])
        if tidied is not None:
            # Comments that no longer describe code go before the check, which then sees
            # the text that is written (its line numbers moved); if it failed, the check
            # falls back to the untidied one.
            history = (*history, tidied)
        try:
            best, counts, signature = verify_history(
                # Shown as they happen too: a result checked fewer times than --verify asks
                # (--max-time), or a fallback, must not be news only in the report.
                history, self.oracle, self.target, runs_asked, self.note, self.deadline,
            )
        except KeyboardInterrupt:
            self.note("interrupted while the result was re-checked: it was not verified", show=False)
            return Verified(outcome.history[-1], (0, 0), None, "interrupted")
        return Verified(best, counts, signature, outcome.stopped)

    def no_larger(self, history: tuple) -> tuple:
        """The accepted programs that have no more tokens than the one the search started
        from.  The search minimises a weighted order (tokens, blocks, loops, files), not
        tokens, and a candidate with fewer blocks may render to more tokens: a result
        larger than its start is no reduction.  (A start from the saved state may be
        larger than the input, by the restore's statements; it is kept for what it
        saves: the run up to the failing step.)"""
        start = history[0]
        kept = tuple(h for h in history if h.size <= start.size)
        if len(kept) < len(history):
            self.note(
                f"{len(history) - len(kept)} accepted program(s) had more tokens than the one the search started "
                f"from ({start.size}), the smallest {min(h.size for h in history if h.size > start.size)}: the "
                + ("result is the newest with no more" if len(kept) > 1 else "search's start is the result")
            )
        return kept

    def ablate(self, verified: Verified, extracted: Extracted) -> Ablation | None:
        """The verified minimal case, and the extracted call, with one change at a time,
        each run once in its own process (the field guide's comparisons; ablation/): the
        outcomes and the bug's kind they show."""
        best = verified.best
        if not self.config.ablate or not verified.counts[0] or self.out_of_time():
            return None
        started = time.monotonic()
        sig = self.target.signature
        # The changes alter dtypes, shapes and strides on purpose: the same bug is the
        # same class, message and operator.
        target = dataclasses.replace(self.target, strictness=Strictness.OPERATOR)
        on_gpu = sig.on_gpu
        compiled = sig.family is Family.COMPILE
        fresh: list[ablation.Change] = ablation.compile_changes(best.files) if compiled else []
        fresh += ablation.extension_changes(best.files, self.program.main)
        fresh += ablation.program_changes(best.files, self.program.main, on_gpu=on_gpu,
                                          launch_env=dict(self.spec.env or {}))
        extraction = extracted.extraction
        forked: list[ablation.Change] = []
        if extraction is not None and extraction.op and extraction.arguments:
            forked = ablation.call_changes(
                extraction.text, extraction.op, extraction.arguments, script=self.program.main,
                data=str(extraction.data.resolve()) if extraction.data else None, gpu_visible=bool(self.plan.gpus))
        changes = forked + fresh
        if not changes:
            return None
        self.emit(Stage(f"one change at a time: {len(changes)} runs ({', '.join(c.name for c in changes)})"))
        pin = self.plan.first_device

        # A change of the whole case that passes: what the call that failed in it (the
        # N-th of its operator in the minimal case, not in the original) returned there
        # (a compiled callable or a module's own check is no call the probe numbers).
        failed = verified.signature
        summarised = (Watch(output_of=(failed.op.name, failed.call))
                      if failed is not None and failed.op is not None and failed.call else None)

        def run_as(isolation: Isolation, timeout: float, watch: Watch | None = None):
            return lambda batch: self.runner.run_each([(c.files, {**pin, **c.env}) for c in batch],
                                                      at_once=self.plan.jobs, timeout=timeout, isolation=isolation,
                                                      watch=watch)

        try:
            # The extracted call runs where candidates run (it is one import and one call);
            # a compiled case in a fresh interpreter, where Inductor's state is its own.
            found = ablation.outcomes(forked, run_as(self.runner.isolation, min(self.oracle.fresh_timeout,
                                                                                 EXTRACT_CHECK_MAX)), target)
            found += ablation.outcomes(fresh, run_as(Isolation.FRESH, self.oracle.fresh_timeout, summarised), target)
        except KeyboardInterrupt:
            self.note("interrupted while the result ran with one change at a time: no comparison", show=False)
            return None
        stage = ablation.summary([o for o in found if o.category == ablation.BACKEND],
                                 ablation.compile_backend(best.files)) if compiled else None
        kind = ablation.kind_of(found, on_gpu=on_gpu, compiled=compiled)
        for o in found:
            self.emit(Stage(f"  {o.change} ({o.subject}): {o.result}" + (f" ({o.error})" if o.error else "")
                            + (f" -> {o.output}" if o.output else "")))
        if stage:
            self.emit(Stage(stage))
        self.emit(Stage(f"the kind: {kind.kind}: {kind.reason}"))
        return Ablation(tuple(found), kind.kind, kind.reason, kind.hint, stage, time.monotonic() - started)

    def tidied(self, best: Candidate) -> Candidate | None:
        """The result with the comments that no longer describe code taken out
        (``syntax.tidy``), or None when there are none."""
        originals = list(self.program.texts.values()) + (list(self.replay.texts.values()) if self.replay else [])
        files = {name: tidy(text, originals) if name.endswith(".py") else text for name, text in best.files.items()}
        if files == dict(best.files):
            return None
        return Program(files, self.program.main, facts=best.program.facts).initial()

    # -- before the search ------------------------------------------------------------------
    def before_search(self, first: Observation) -> Extracted:
        """What a user with a two-hour job wants after one run: the failing call alone,
        written now (from the arguments the first run kept as the call raised; else one
        capture run of the original, which a failed GPU kernel needs).  With a long
        original that failed past the first iteration of a loop, that same run saves the
        state at the start of the failing iteration, and a fresh interpreter checks that
        starting there fails the same way before any candidate relies on it."""
        config = self.config
        extracting = config.extract and config.write
        extracted = Extracted(None, None)
        kept = self.kept_extraction(first) if extracting and config.resume else None
        if kept is not None:
            extracted = kept
        try:
            record = raised_record(first.raised_calls, self.target.signature) if extracting and kept is None else None
        except ExtractionFailed as exc:  # a compiled function that could not be written
            record, extracted = None, self.not_extracted(exc.reason)
        if record is not None:
            extracted = self.extract_from(record, first)
        point = self.state_point(first)
        resumed = self.kept_state(point) if point is not None and config.resume else None
        if point is not None and resumed is None and self.cut is not None and self.cut_start(first, LIBRARY_START):
            # The library's call into the user's code, made directly, needs none of the
            # steps before the failure: no state to save, and no run of the original for it.
            self.note(f"no state is saved at {point_text(point)}: the search starts from {self.start_what}", show=False)
            point = None
        capture = None
        # A call the first run kept as it raised and that did not fail alone would not
        # fail alone from a capture either; a call it could not keep (a failed GPU kernel
        # leaves nothing to read) needs the capture, before the call.
        if extracting and record is None and kept is None and extracted.error is None:
            try:
                capture = capture_of(self.target.signature, self.sandbox.session)
            except ExtractionFailed as exc:
                extracted = self.not_extracted(exc.reason)
        saving = point is not None and resumed is None
        if (not saving and capture is None and resumed is None) or self.out_of_time():
            return extracted
        with self.new_runner(Isolation.FRESH) as fresh:
            fresh.start()
            if saving or capture is not None:
                state_path = self.sandbox.session / "state.pt"
                progress = self.sandbox.session / "state-progress"
                watch = Watch(capture=capture, state=point.watch(state_path, progress) if saving else None)
                what = [f"saving the state at {point_text(point)}" if saving else "", "capturing the failing call" if capture is not None else ""]
                self.emit(Stage("running the original once more: " + " and ".join(w for w in what if w)))
                obs = self.wait(fresh.submit(self.files, timeout=self.fresh_limit(first), watch=watch,
                                             env=self.plan.first_device), "the original is still running",
                                progress=(progress, point) if saving else None)
                if capture is not None:
                    if Path(capture.path + ".json").is_file():
                        try:
                            extracted = self.extract_from(read_record(Path(capture.path)), first)
                        except ExtractionFailed as exc:
                            extracted = self.not_extracted(exc.reason)
                    else:
                        extracted = self.not_extracted(
                            f"the call was not reached in the capture run ({obs.describe()})")
                if saving:
                    self.state = self.checked_state(fresh, first, obs, point, state_path)
            if resumed is not None:
                saved, path = resumed
                self.state = self.checked_state(fresh, first, None, point, path, saved=saved)
        return extracted

    def cut_start(self, first: Observation, cuts=START_CUTS) -> bool:
        """A long original that no saved state replays still spends every candidate's run
        on the steps before the failure until a pass cuts them, and the search's first
        candidates are tried in the order of the passes, one original's run each.  So the
        cuts that drop those steps are tried here first, each in a fresh interpreter
        (START_CUTS: the direct call past the library, which a failure inside
        ``Trainer.fit`` needs none of the steps for; the original without the loops that
        took its time); the first that fails the same way in less time is where the
        search starts, and its rate and calibration are measured on it."""
        if self.replay is not None or first.wall < STATE_MIN_SECONDS or self.out_of_time():
            return False
        initial = self.program.initial()
        with self.new_runner(Isolation.FRESH) as fresh:
            fresh.start()
            for prepare, cut, what in cuts:
                cand = None if what in self.cuts_tried else cut_with(initial, prepare, cut)
                self.cuts_tried.add(what)
                if cand is None:
                    continue
                self.emit(Stage(f"checking in a fresh interpreter whether {what} fails the same way"))
                # A cut that runs longer is refused anyway (SLOWER_REPLAY): one that does
                # not fail at the call goes on with the rest of the program, and must not
                # cost a whole run of the original.
                limit = min(self.fresh_limit(first), SLOWER_REPLAY * first.wall)
                obs = self.wait(fresh.submit(cand.files, timeout=limit, env=self.plan.first_device),
                                f"the original with {what} is still running")
                if not self.target.matches(obs.signature):
                    self.note(f"the original with {what} does not fail the same way ({obs.describe()})", show=False)
                    continue
                if obs.wall > SLOWER_REPLAY * first.wall:
                    self.note(f"the original with {what} fails the same way, but in {obs.wall:.1f}s of the "
                              f"original's {first.wall:.1f}s", show=False)
                    continue
                self.note(f"the original with {what} fails the same way in a fresh interpreter in "
                          f"{obs.wall:.1f}s (the original: {first.wall:.1f}s): the search starts there")
                self.start_what = f"the original with {what}"
                self.replay_wall = obs.wall
                self.replay = Program(dict(cand.files), self.program.main, facts=dataclasses.replace(
                    facts_of(obs), loops=self.loops, cut=self.cut, hot_loops=self.hot,
                    saved_objects=self.saved_objects, sizes=self.sizes,
                ))
                return True
        return False

    def kept_extraction(self, first: Observation) -> Extracted | None:
        """--resume: the extracted call an earlier run of this reduction wrote, when it
        still fails the same way in a fresh interpreter."""
        stem = self.layout.extracted_stem
        path = stem.with_name(f"{stem.name}.extracted.py")
        if not path.is_file():
            return None
        extraction = check_extracted(path, self.target, min(self.fresh_limit(first), EXTRACT_CHECK_MAX),
                                     self.spec.env, self.executors)
        if extraction is None:
            self.note(f"--resume: the extracted call at {path.name} no longer fails the same way; extracting again")
            return None
        self.emit(Stage(f"--resume: the extracted call at {path} still fails the same way: kept"))
        return Extracted(extraction, None)

    def state_files(self) -> tuple[Path, Path, Path]:
        """The state beside the output, the record of what it holds and where it is from,
        and the directory of the files the run wrote before it."""
        base = self.layout.data_dir / f"{self.layout.data_stem}.state"
        return base.with_name(base.name + ".pt"), base.with_name(base.name + ".json"), base.with_name(base.name + ".files")

    def kept_state(self, point: StatePoint) -> tuple[dict, Path] | None:
        """--resume: the state an earlier run of this reduction saved at the same point,
        so that the run that saves it is not repeated (the replay is checked again)."""
        data, sidecar, files = self.state_files()
        try:
            kept = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not data.is_file() or kept.get("point") != [point.file, point.header_text, point.iteration, point.call]:
            return None
        self.emit(Stage(f"--resume: the state saved at iteration {point.iteration} of `{point.header_text}` "
                        f"is at {data.name}: not saved again"))
        # A copy of its own: the file beside the output is rewritten with the result.
        copy = self.sandbox.session / "state.pt"
        shutil.copy2(data, copy)
        if files.is_dir():
            shutil.copytree(files, Path(str(copy) + ".files"), dirs_exist_ok=True)
        return kept.get("saved") or {}, copy

    def fresh_limit(self, first: Observation) -> float:
        limit = self.config.timeout or calibrated_timeout([first.wall])
        left = self.left()
        return limit if left is None else min(limit, left)

    def wait(self, future, saying: str, progress: tuple[Path, StatePoint] | None = None) -> Observation:
        """The future's observation, with a progress line every ``heartbeat`` seconds;
        ``progress``: the file the probe writes the iteration of the loop to, and where
        the state is saved (how far the run is from it)."""
        import concurrent.futures

        started = time.monotonic()
        while True:
            try:
                return future.result(timeout=self.heartbeat)
            except concurrent.futures.TimeoutError:
                minutes, seconds = divmod(int(time.monotonic() - started), 60)
                where = ""
                if progress is not None:
                    path, point = progress
                    try:
                        seen = tuple(int(n) for n in path.read_text(encoding="utf-8").split(","))
                    except (OSError, ValueError):
                        seen = None
                    if seen and len(seen) == len(point.iterations):
                        goal = tuple(it for _h, it in point.iterations)
                        if len(seen) == 1:
                            where = (f", iteration {seen[0]} of `{point.header_text}`; the state is saved at "
                                     f"iteration {goal[0]}")
                        else:
                            where = (f", iterations {seen} of the loops around the failure; the state is saved "
                                     f"at {goal}")
                self.emit(Stage(f"{saying} ({minutes}:{seconds:02d}{where})"))

    def extract_from(self, record: dict, first: Observation) -> Extracted:
        """The failing call of ``record`` written alone, checked in a fresh interpreter (one
        call: it takes an import of torch, not a run of the original)."""
        self.emit(Stage("extracting the failing call"))
        try:
            extraction = extract_record(record, self.target, self.layout.extracted_stem,
                                        min(self.fresh_limit(first), EXTRACT_CHECK_MAX), self.spec.env, self.executors,
                                        on_event=lambda m: self.emit(Stage(m)))
        except ExtractionFailed as exc:
            return self.not_extracted(exc.reason)
        self.emit(Stage(f"the failing call alone is written: {extraction.path} (the search for the smallest program "
                        "follows)"))
        if extraction.note:
            self.note(f"the extracted call is {extraction.note}", show=False)
        return Extracted(extraction, None)

    def not_extracted(self, reason: str) -> Extracted:
        self.note(f"the failing call was not extracted: {reason}", show=False)
        return Extracted(None, reason)

    def state_point(self, first: Observation) -> StatePoint | None:
        """Where to save the state, when saving it pays (a long original that failed past
        the first iteration of a loop); the reason not to, said, when it would have."""
        config = self.config
        if not (config.replay_state and config.write) or first.wall < STATE_MIN_SECONDS:
            return None
        point = state_point(first, self.files, self.program.main, self.hot)
        if isinstance(point, str):
            self.note(f"no state was saved to start candidates at the failing step: {point}", show=False)
            return None
        left = self.left()
        # The run that saves it takes about the original's time (it traces only the frame
        # of the loop, and stops at the failing iteration) and less than the first run,
        # which traced every line; the check of the replay takes less than one more.
        if left is not None and left < 1.5 * first.wall:
            self.note("no state was saved to start candidates at the failing step: --max-time leaves too little "
                      "time for the run that saves it and the one that checks it", show=False)
            return None
        return point

    def checked_state(self, fresh: Runner, first: Observation, obs: Observation | None, point: StatePoint,
                      path: Path, saved: dict | None = None) -> StateRecord | None:
        """The saved state as a fact for the passes, when a fresh interpreter started from it
        fails with the same bug; else None, and the note says why.  ``obs``: the run that
        saved it (None: the state --resume found, ``saved`` its record)."""
        if obs is not None:
            saved = obs.state
        where = point_text(point)

        def refuse(why: str) -> None:
            self.note(f"the state at {where} is not used: {why}")

        if saved is None:
            return refuse(f"the run that was to save it never reached that iteration ({obs.describe()})")
        if saved.get("error") or not path.is_file():
            return refuse(f"it could not be saved: {saved.get('error') or 'no file was written'}")
        if obs is not None and not self.target.matches(obs.signature):
            return refuse(f"the run that saved it failed otherwise ({obs.describe()})")
        name = f"{self.layout.data_stem}.state.pt"
        main_dir = Path(self.spec.script_rel).parent
        rel = str(main_dir / name) if main_dir != Path(".") else name
        if (self.spec.root_dir / rel).exists() and (self.spec.root_dir / rel).resolve() != (self.layout.data_dir / name).resolve():
            return refuse(f"a file of yours is named {name}")
        self.sandbox.add_file(rel, path)
        # The files the run wrote before that iteration (a checkpoint the training saved and
        # the statements before the failing loop load) go beside the state.
        files_name = f"{self.layout.data_stem}.state.files"
        files_src = Path(str(path) + ".files")  # where the probe copied them (save_written_files)
        written = [f for f in saved.get("files") or () if (files_src / f).is_file()]
        if written and (self.spec.root_dir / main_dir / files_name).exists():
            written = []
            self.note(f"the files the run wrote before {where} are not put back: a file of yours is named "
                      f"{files_name}", show=False)
        for f in written:
            self.sandbox.add_file(str(main_dir / files_name / f), files_src / f)
        record = state_record(saved, point, name, files_name if written else "")
        facts = dataclasses.replace(self.program.facts, state=record)
        program = Program(self.program.texts, self.program.main, facts=facts)
        passes = ReplayFromState()
        tried = []
        # Level 1 keeps every loop but the one the state was saved in: it skips iterations
        # only when some loop around the failure was past its first one.
        skips = any(iteration > 0 for _header, iteration in point.iterations)
        for level in (0, 1) if skips else (0,):
            units = passes.units(program.initial(), level) or []
            for unit in units:
                files = program.initial().with_edits(unit).files
                self.emit(Stage(f"checking in a fresh interpreter that starting at {where} fails the same way"))
                replay = self.wait(fresh.submit(files, timeout=self.fresh_limit(first), env=self.plan.first_device),
                                   "the replay is still running")
                if self.target.matches(replay.signature) and replay.wall > SLOWER_REPLAY * first.wall:
                    tried.append(f"it fails the same way, but in {replay.wall:.1f}s of the original's {first.wall:.1f}s")
                    continue
                if self.target.matches(replay.signature):
                    size = saved.get("bytes", path.stat().st_size)
                    self.data_files[name] = path
                    # Beside the output now: the partial result the search keeps on disk
                    # loads it, and --resume starts from that.
                    beside, sidecar, beside_files = self.state_files()
                    beside.parent.mkdir(parents=True, exist_ok=True)
                    if path.resolve() != beside.resolve():
                        shutil.copy2(path, beside)
                    files_note = ""
                    if record.files_dir:
                        self.data_files[record.files_dir] = files_src
                        if files_src.resolve() != beside_files.resolve():
                            shutil.rmtree(beside_files, ignore_errors=True)
                            shutil.copytree(files_src, beside_files)
                        shown = ", ".join(written[:3]) + (", ..." if len(written) > 3 else "")
                        files_note = (f"; with {len(written)} file(s) the run wrote before it: {shown}, "
                                      f"{saved.get('files_bytes', 0) / 2**20:.1f} MiB in {record.files_dir}")
                    sidecar.write_text(json.dumps({
                        "point": [point.file, point.header_text, point.iteration, point.call], "saved": saved,
                    }, indent=2, default=str), encoding="utf-8")
                    self.note(
                        f"the state at {where} ({len(record.entries)} objects, {size / 2**20:.1f} MiB{files_note}) replays the "
                        f"bug in a fresh interpreter in {replay.wall:.1f}s (the original: {first.wall:.1f}s): "
                        "candidates may start there. If the result keeps it, it loads " + name + ", which holds your "
                        "weights: attach the extracted call to a public issue, not that file"
                    )
                    self.program = program
                    # The program the search starts from: its own text, with the facts of its
                    # fresh run (its failing lines), and what the original's run showed.
                    self.replay_wall = replay.wall
                    self.replay = Program(files, program.main, facts=dataclasses.replace(
                        facts_of(replay), loops=self.loops, cut=self.cut, hot_loops=self.hot,
                        saved_objects=self.saved_objects, state=record, sizes=self.sizes,
                    ))
                    return record
                tried.append(replay.describe())
        if not tried:
            return refuse("the loop's body cannot be run on its own here")
        if all("fails the same way, but" in t for t in tried):
            return refuse("starting there saves too little time (" + "; ".join(tried) + ")")
        return refuse("starting there did not fail the same way (" + "; ".join(tried) + ")" + describe_left(saved))

    def finish(self, first_run: FirstRun, rate: Rate, calibration: Calibration, outcome: Outcome,
               verified: Verified, extracted: Extracted, ablated: Ablation | None = None) -> ReductionResult:
        """The result, and with ``write`` its files, report and case file."""
        config, spec, first, best = self.config, self.spec, first_run.observation, verified.best
        launch = first_run.launch
        modules = sorted(p for p in best.files if p.endswith(".py"))
        if config.write and len(best.files) > 1:
            self.note(
                f"the result still needs {len(modules)} files ({', '.join(modules)}), so it is the directory "
                f"{self.layout.directory}/, not {self.layout.output.name}"
            )
        result = ReductionResult(
            output=None,
            report=None,
            files=dict(best.files),
            main=self.program.main,
            signature=first.signature,
            final_signature=verified.signature,
            tokens_before=self.original_size,
            tokens_after=best.size,
            candidates_tested=outcome.tests,
            oracle=self.oracle.stats,
            seconds=time.monotonic() - self.started,
            stopped=verified.stopped,
            verified=verified.counts,
            isolation=self.runner.isolation,
            preload_modules=len(self.preload.modules),
            timeout=calibration.timeout,
            calibration=tuple(round(w, 4) for w in calibration.walls),
            jobs=self.plan.jobs,
            threads=self.plan.threads,
            gpus=self.plan.gpus,
            environment=first.environment,
            notes=self.notes,
            launch_env={
                **(dict([launch]) if launch is not None else {}),
                **({"PYTHONHASHSEED": str(config.hash_seed)} if config.hash_seed is not None else {}),
            },
            surfaced=first_run.surfaced,
            original_rate=(rate.reproduced, rate.runs),
            needs=tuple(sorted(set(self.oracle.verified_reads) - set(best.files))),
            extracted=extracted.extraction,
            extract_error=extracted.error,
            trace=tuple(self.trace),
            data_files={name: str(path) for name, path in self.data_files.items()
                        if any(name in text for text in best.files.values())},
            loaded_objects=tuple((o.file, ", ".join(o.targets) or o.name, o.cls, o.size) for o in self.saved_objects
                                 if any(o.file in text for text in best.files.values())),
            case={
                "keep_error": config.keep_error,
                "family": config.family.key if config.family else None,
                "strictness": config.strictness.value,
                "script": str(spec.script),
                "args": list(spec.args),
                "cwd": str(spec.cwd),
                "root": str(spec.root_dir),
                "module": spec.module,
                "argv0": spec.argv0,
                "original_output": first.stdout[-16384:],
                "timeout_fresh": self.oracle.fresh_timeout,
            },
            loops=tuple(first.loops),
            varying=tuple(sorted(self.target.free)),
            state=self.state_fact(best),
            passes=self.stats.to_json(),
            ablation=ablated,
        )
        if config.write and self.state is not None and self.state.state_file not in result.data_files:
            # The user's weights are not left beside a result that does not read them.
            for leftover in self.state_files():
                if leftover.is_dir():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink(missing_ok=True)
        elif config.write and self.state is not None and self.state.files_dir not in result.data_files:
            # the result kept the state but not the files the run wrote before it
            shutil.rmtree(self.state_files()[2], ignore_errors=True)
        if config.write:
            result.collect_env = self.versions.result() if self.versions is not None else None
            result.revision = self.revision
            write_outputs(result, self.layout, spec)
            if result.output.is_dir():
                self.emit(Stage(f"run it with: {result.command}"))
            if verified.counts[1] and written_elsewhere(result.output, spec):
                # The command the report prints must run as printed: what the result
                # reads goes beside it (or the command runs it where its data is).
                place_needed_files(result, spec)
                result.in_place = run_where_written(result, spec, self.target, self.oracle.fresh_timeout,
                                                    executors=self.executors)
                write_outputs(result, self.layout, spec)  # the report says how that went
        return result


def point_text(point: StatePoint) -> str:
    """Where the state is saved, in words."""
    call = f", in call {point.call} of the function that holds it" if point.call > 1 else ""
    return f"iteration {point.iteration} of `{point.header_text}` ({point.file}{call})"


def cut_with(initial: Candidate, prepare, cut) -> Candidate | None:
    """``initial`` with the first unit of ``prepare`` (when it offers one), then the
    first of ``cut``; None when ``cut`` offers none."""
    cand = initial
    first = next(iter(prepare.units(cand, 0) or []), None) if prepare is not None else None
    if first is not None:
        cand = cand.with_edits(first)
    unit = next(iter(cut.units(cand, 0) or []), None)
    return cand.with_edits(unit) if unit is not None else None


def reduce(
    config: ReduceConfig,
    on_event: Callable[[object], None] | None = None,
    *,
    executors: ExecutorFactory = default_executor,
) -> ReductionResult:
    """Reduce ``config``'s script to a smaller one that fails with the same first error;
    write it (with ``config.write``) and return what happened."""
    return Reduction(config, on_event, executors=executors).run()
