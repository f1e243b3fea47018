"""The pool of workers (a reduction's phase before the search): how many candidates at
once, on which GPUs, with how many threads each (``plan_workers``); then the workers
started, how often the original fails in fresh interpreters, the original timed where
candidates will run (is forking faithful for it, what is a candidate's time limit,
may candidates start with its compile caches) and, for a torch.compile failure, how it
runs with its compiled code run eagerly (``open_pool``).

Only this phase replaces a runner (fork servers with their own hash seeds for a flaky
original, fresh interpreters when forking is not faithful); what it returns is the
runner every later phase uses.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from shrinkgpu.core.rates import RateTest, describe_rate
from shrinkgpu.families import Family
from shrinkgpu.limits import DEFAULT_FRESH_TIMEOUT, calibrated_timeout, warm_timeout
from shrinkgpu.reducer import state as state_rules
from shrinkgpu.reducer.config import NotReproduced, ReduceError
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.first_run import FORK_ADVICE
from shrinkgpu.signature import Target
from shrinkgpu.worker import (
    ForkUnavailable,
    Isolation,
    Observation,
    PreloadReport,
    Runner,
    Watch,
    cache_bytes,
    compile_caches,
    preload_candidates,
    usable_cpus,
)
from shrinkgpu.worker.devices import visible_gpus

CALIBRATION_RUNS = 3
# A long original (``state.long_run``: its own time at least six imports of torch) gets
# one calibration run, not CALIBRATION_RUNS: its timing is stable enough, and three more
# runs of a two-minute script are six minutes.
FLAKY_SAMPLE = 10  # fresh runs that measure how often a flaky original fails
FLAKY_LANES = 4  # fork servers with their own hash seeds when the original is flaky
# Compile caches past this size are not copied into every candidate's directory: the copy
# would cost what compiling saves, and jobs x this much disk.
WARM_CACHE_MAX = 512 * 2**20
# Seconds a candidate's ranks must wait, unchanged, in collectives not all reach before
# it hangs (the original, which nothing is known of yet, waits launch.hang_after).
CANDIDATE_HANG_AFTER = 5.0


@dataclass(frozen=True)
class WorkerPlan:
    """How candidates run: ``jobs`` at once, each pinned in turn to one of ``gpus``
    through ``pin_variable``, its thread pools capped to ``threads`` (None: as python
    sizes them)."""

    gpus: tuple[str, ...]
    pin_variable: str
    jobs: int
    threads: int | None
    cores: int
    per_run: int  # threads one run of the script uses

    @property
    def first_device(self) -> dict[str, str]:
        """The variable that pins a lone run (the original's) to the first GPU."""
        return {self.pin_variable: self.gpus[0]} if self.gpus else {}


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
class Contrast:
    """How a torch.compile failure's candidates are run once more with their compiled
    code run eagerly (``watch``), and whether the original passes that way (``passes``)."""

    watch: Watch
    passes: bool


@dataclass(frozen=True)
class Measured:
    """The program candidates are measured on (the original, or the program the search
    starts from), what it is, and how long its fresh run took."""

    files: Mapping[str, str]
    what: str
    wall: float


@dataclass(frozen=True)
class Pool:
    """The workers of the search and of every phase after it."""

    runner: Runner
    plan: WorkerPlan
    preload: PreloadReport
    rate: Rate
    calibration: Calibration
    contrast: Contrast | None
    # why every candidate runs in a fresh interpreter (None: they are forked)
    fresh_because: str | None = None
    # a torch.compile failure with its compiled code run eagerly: "passes", "fails
    # otherwise", "fails the same way" or "did not end" (None: not a compile failure)
    eager: str | None = None
    # why the search is not tried (--max-time left too little to prepare it), or None
    no_search: str | None = None

    def close(self) -> None:
        self.runner.close()


# -- the plan --------------------------------------------------------------------------------
def pin_variable_for(env: Mapping[str, str] | None, environment: Mapping[str, object]) -> str:
    """The variable that pins a candidate to a device: the one the user restricted the
    devices with, if any (its values are what ``--gpus`` and the detection return), else
    the backend's own."""
    env = os.environ if env is None else env
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if env.get(name) is not None:
            return name
    return "HIP_VISIBLE_DEVICES" if environment.get("hip") else "CUDA_VISIBLE_DEVICES"


def run_threads(environment: Mapping[str, object]) -> int:
    """Threads one run of the script uses for its pools, as its fresh run reported them."""
    counts = environment.get("threads") if isinstance(environment, Mapping) else None
    if not isinstance(counts, Mapping):
        return 1
    sizes = [v for k, v in counts.items() if k in ("torch", "blas") and isinstance(v, int)]
    return max([1, *sizes])


def plan_jobs(jobs: int | None, gpus: int, cores: int, per_run: int, processes: int = 1) -> tuple[int, int | None]:
    """Candidates at once, and the thread cap each of a candidate's processes gets (None:
    as python would size them); ``per_run``: the threads of one candidate, its
    ``processes`` (ranks) together.

    Never more threads than cores: jobs x threads per run <= cores.  By default a candidate
    keeps the thread counts of ``python script.py`` (a faithful run) and the jobs are what
    fits beside it; with GPUs, one job per GPU, and with ``-j``, what is asked: then each
    candidate's pools are capped to its share of the cores, divided among its ranks.  A
    candidate of more ranks than cores oversubscribes as the user's own run does: its
    ranks keep what they had, at least one thread each."""
    per_run, processes = max(1, per_run), max(1, processes)
    if jobs is None:
        jobs = gpus if gpus else max(1, cores // per_run)
    if jobs * per_run <= cores:
        return jobs, None
    cap = max(1, cores // (jobs * processes))
    if cap * processes >= per_run:
        return jobs, None  # (each process already has no more than its share)
    return jobs, cap


def plan_workers(ctx: Context, first: Observation) -> WorkerPlan:
    config, spec = ctx.config, ctx.spec
    gpus = tuple(config.gpus if config.gpus is not None else visible_gpus(spec.env))
    # An executor factory whose candidates run elsewhere says how many cores its workers
    # hold in all (a Ray cluster: workers x the CPUs each asks for): the thread pools are
    # sized to those, not to this machine's
    elsewhere = ctx.executors.capacity().cores
    cores = elsewhere if elsewhere is not None else usable_cpus()
    where = " of the workers" if elsewhere is not None else ""
    # (a script that starts its own ranks runs as many processes per candidate)
    ranks = spec.launch.nproc if spec.launch.ranks else max(1, first.world_size if first.launcher else 1)
    # a candidate of N ranks runs N processes, each with the thread pools one reported
    per_run = run_threads(first.environment) * ranks
    jobs = config.jobs
    if spawns_its_own_ranks(first) and (jobs or 2) > 1:
        # its ranks meet at the port the script chose (MASTER_PORT=12355): two candidates
        # at once would take each other's
        jobs = 1
        ctx.talk.note("the script starts its own ranks (torch.multiprocessing): candidates run one at a time, "
                      "because its ranks meet at a port the script chose")
    if ranks > 1 and gpus:
        gpus = rank_devices(ctx, gpus, ranks)
        if not gpus:
            jobs = 1  # every candidate sees every GPU: two at once would share them
    jobs, threads = plan_jobs(jobs, len(gpus), cores, per_run, ranks)
    if gpus and first.signature.family is Family.OUT_OF_MEMORY and jobs > len(gpus):
        # Two candidates on one device would each see the other's memory.
        jobs = len(gpus)
        ctx.talk.note(f"out of memory: {jobs} candidate(s) at once, one per GPU, never two on one device")
    if threads is not None:
        each = f"each of its {ranks} ranks" if ranks > 1 else "each"
        ctx.talk.note(
            f"{jobs} candidates at once on {cores} CPU cores{where}: {each} runs with {threads} thread(s) where "
            f"python would use {per_run // ranks} (-j {max(1, cores // per_run)} keeps {per_run // ranks})"
        )
    return WorkerPlan(gpus, pin_variable_for(spec.env, first.environment), jobs, threads, cores, per_run)


def spawns_its_own_ranks(first: Observation) -> bool:
    """Whether the script started processes of its own that meet in a process group
    (``torch.multiprocessing.spawn``), not ranks shrinkgpu launches."""
    imported = {name for name, _file, _local in first.modules}
    return first.launcher is not None and "torch.distributed" in imported


def rank_devices(ctx: Context, gpus: tuple[str, ...], ranks: int) -> tuple[str, ...]:
    """The devices of a candidate of ``ranks`` ranks, as torchrun's ranks see them: each
    candidate its own ``ranks`` GPUs (``CUDA_VISIBLE_DEVICES=0,1``), rank k on the k-th
    (its ``LOCAL_RANK``); none pinned when there are fewer GPUs than ranks."""
    if len(gpus) < ranks:
        ctx.talk.note(f"{ranks} ranks and {len(gpus)} GPU(s): every candidate sees them all, one candidate at a time")
        return ()
    groups = tuple(",".join(gpus[i:i + ranks]) for i in range(0, len(gpus) - ranks + 1, ranks))
    ctx.talk.note(f"{ranks} ranks per candidate: each of {len(groups)} candidate(s) at once sees {ranks} GPUs of its "
                  "own, rank k the k-th (its LOCAL_RANK)")
    return groups


# -- the pool ----------------------------------------------------------------------------------
def open_pool(ctx: Context, first: Observation, attempts: tuple[Observation, ...], target: Target,
              program_files, measured: Measured, plan: WorkerPlan) -> Pool:
    """The workers started (a fork server unless --isolation fresh), the original's rate,
    the calibration (the limits set in ``ctx.limits``) and the compile contrast.  The
    caller closes the pool; a failure on the way closes its runner."""
    modules = preload_candidates(first.modules, [ctx.spec.root_dir])
    launch = ctx.spec.launch
    if launch.ranks and launch.hang_after > CANDIDATE_HANG_AFTER:
        # The original's hang is known: a candidate whose ranks wait, still, in collectives
        # not all of them reach is that hang after seconds, not after the original's wait.
        ctx = ctx.with_spec(dataclasses.replace(ctx.spec, launch=dataclasses.replace(
            launch, hang_after=CANDIDATE_HANG_AFTER)))

    def runner_of(isolation: Isolation, lanes: int = 1) -> Runner:
        return ctx.runner(isolation, program_files=program_files, threads=plan.threads, lanes=lanes)

    refused = ctx.limits.slot("the search (its workers started, the start's rate and its timing where candidates "
                              "run)", preparation_needs(ctx, measured, first, plan), DEFAULT_FRESH_TIMEOUT).refused
    if refused:
        return pool_out_of_time(ctx, runner_of(Isolation.FRESH), measured, attempts, target, plan, first, refused)
    runner = runner_of(ctx.config.isolation or Isolation.FORK)
    try:
        preload = start_workers(ctx, runner, modules, first)
        rate, runner = measure_rate(ctx, runner, measured, attempts, target, plan, first,
                                    lambda: started(ctx, runner_of(Isolation.FORK, FLAKY_LANES), modules))
        walls, runner, plan, not_faithful = calibrate(ctx, runner, measured, rate, target, plan,
                                                      lambda lanes: runner_of(Isolation.FRESH, lanes))
        timeout = ctx.config.timeout or candidate_timeout(walls, runner.warm_caches is not None)
        calibration = Calibration(tuple(walls), timeout, calibrated_timeout([first.wall]))
        ctx.limits.calibrate(calibration.timeout, calibration.fresh_timeout, max(walls))
        contrast, eager = eager_contrast(ctx, runner, measured, target, plan, calibration)
    except BaseException:
        runner.close()
        raise
    fresh_because = None
    if runner.isolation is Isolation.FRESH:
        fresh_because = preload.note or not_faithful or "asked for (--isolation fresh)"
    return Pool(runner, plan, preload, rate, calibration, contrast, fresh_because, eager)


def calibration_runs(ctx: Context, wall: float) -> int:
    """How many times the start is timed where candidates run: a count decided on the
    original's length in units of this machine's import of torch, not on seconds."""
    return 1 if state_rules.long_run(wall, ctx.limits) else CALIBRATION_RUNS


def preparation_needs(ctx: Context, measured: Measured, first: Observation, plan: WorkerPlan) -> float:
    """Seconds the pool takes before the first candidate, about: the fork server's
    preload (about an import of torch), the --confirm runs in fresh interpreters, the
    calibration where candidates run, the eager run of a compile failure."""
    wall, startup = measured.wall, ctx.limits.startup
    fresh = -(-max(0, ctx.config.confirm) // max(1, plan.jobs))  # (side by side, as many as run at once)
    forked = calibration_runs(ctx, wall) + (first.signature is not None and first.signature.family is Family.COMPILE)
    # a forked run pays no import of torch: the preload did
    return startup + fresh * wall + forked * max(wall - startup, 0.1)


def pool_out_of_time(ctx: Context, runner: Runner, measured: Measured, attempts: tuple[Observation, ...],
                     target: Target, plan: WorkerPlan, first: Observation, refused: str) -> Pool:
    """The pool when --max-time leaves the search no time: no search (said), and for
    the checks after it that still fit, fresh interpreters (no fork server to preload,
    none of its runs to time), the rate of the runs already made, the limits of the
    first run."""
    ctx.talk.note(refused)
    preload = runner.start()
    rate = Rate(sum(target.matches(o.signature) for o in attempts), len(attempts))
    timeout = ctx.config.timeout or calibrated_timeout([measured.wall])
    calibration = Calibration((measured.wall,), timeout, calibrated_timeout([first.wall]))
    ctx.limits.calibrate(calibration.timeout, calibration.fresh_timeout, measured.wall)
    return Pool(runner, plan, preload, rate, calibration, None, refused, None, no_search=refused)


def candidate_timeout(walls: list[float], warm: bool) -> float:
    """A candidate's limit from the original's runs where candidates run: with the
    compile caches every candidate starts with (``warm``: the first run filled them),
    from the runs that had them, not the one that compiled from nothing."""
    if warm and len(walls) > 1:
        return warm_timeout(walls[0], walls[1:])
    return calibrated_timeout(walls)


def started(ctx: Context, runner: Runner, modules) -> Runner:
    start(ctx, runner, modules)
    return runner


def start(ctx: Context, runner: Runner, modules) -> PreloadReport:
    try:
        return runner.start(modules, required=ctx.config.isolation is Isolation.FORK)
    except ForkUnavailable as exc:
        raise ReduceError(f"--isolation fork is not possible here: {exc.reason}. {FORK_ADVICE}") from None


def start_workers(ctx: Context, runner: Runner, modules: list[str], first: Observation) -> PreloadReport:
    """The fork server, preloaded with the installed modules the original imported
    (or fresh interpreters), and what the user must know about it."""
    talk = ctx.talk
    fork = runner.isolation is Isolation.FORK
    talk.stage("starting workers" + (" and preloading modules" if fork else ""))
    report = start(ctx, runner, modules)
    if report.isolation is Isolation.FORK:
        talk.stage(f"fork server ready: {len(report.modules)} modules preloaded in {report.seconds:.1f}s")
    if report.dropped:
        talk.note(
            "not preloaded, because forking after importing them is unsafe (each candidate imports "
            "them itself, which is slower): " + "; ".join(str(d) for d in report.dropped)
        )
    if report.note:
        talk.note(f"{report.note}: expect seconds per candidate instead of milliseconds. {FORK_ADVICE}")
    imported = {name for name, _file, _local in first.modules}
    if report.isolation is Isolation.FORK and "torch" in imported and "torch" not in report.modules:
        # Forking still works, but every candidate pays torch's import: a fallback in
        # all but name, and it must not be a silent one.
        torch_file = next((f for n, f, _ in first.modules if n == "torch"), None)
        # A preload candidate the server did not keep was dropped: say why in the server's
        # own words, not the usual cause.
        reason = next((d.reason for d in report.dropped if d.module == "torch"), None)
        why = (f"Forking after importing it is unsafe here: {reason}." if reason else
               "Importing it made forking unsafe here (above)." if "torch" in modules else
               "It is preloaded when it is installed (site-packages), not one of your files.")
        talk.note(f"torch ({torch_file}) is not preloaded: each candidate imports it itself (seconds instead "
                  f"of milliseconds). {why}")
    return report


def measure_rate(ctx: Context, runner: Runner, measured: Measured, attempts: tuple[Observation, ...],
                 target: Target, plan: WorkerPlan, first: Observation, lanes) -> tuple[Rate, Runner]:
    """How often the original fails, run as python runs it (a fresh interpreter: new
    random seeds, a new hash seed each time); a result must fail as reliably.  A flaky
    one gets fork servers with their own hash seeds (``lanes()`` starts them)."""
    config, limits = ctx.config, ctx.limits
    confirmed = list(attempts)
    more = config.confirm - (len(attempts) - 1)
    # Started from the saved state, the search judges candidates of the replay: its rate
    # is the one they are measured against, and its runs take seconds where the
    # original's took minutes.
    files, what = measured.files, measured.what

    def fresh_runs(count: int) -> list[Observation]:
        # What runs at once, each batch asking --max-time first; a run the end cut is
        # no run of the rate (it says nothing of how often the start fails).
        out: list[Observation] = []
        for k in range(0, count, plan.jobs):
            slot = limits.slot(f"a run of {what} in a fresh interpreter (how often it fails)", measured.wall,
                               calibrated_timeout([first.wall]))
            if slot.refused:
                ctx.talk.note(f"{slot.refused}: its rate is from the {len(confirmed) + len(out)} run(s) made")
                break
            batch = runner.run_all([(files, plan.first_device)] * min(plan.jobs, count - k), timeout=slot.timeout,
                                   isolation=Isolation.FRESH)
            out += [o for o in batch if not (o.timed_out and limits.out_of_time())]
        return out

    if more > 0:
        ctx.talk.stage(f"running {what} {more} more time(s) in fresh interpreters")
        confirmed += fresh_runs(more)
    if config.confirm > 0 and not all(target.matches(o.signature) for o in confirmed):
        if len(confirmed) < FLAKY_SAMPLE:
            ctx.talk.stage("the original does not fail every time: measuring how often")
            confirmed += fresh_runs(FLAKY_SAMPLE - len(confirmed))
    rate = Rate(sum(target.matches(o.signature) for o in confirmed), len(confirmed))
    if rate.reproduced == 0:
        others = sorted({o.describe() for o in confirmed})
        raise NotReproduced(f"{what} did not fail the same way in any of {rate.runs} fresh runs: "
                            + "; ".join(others[:3]), confirmed[0])
    if rate.value < 1.0:
        others = sorted({o.describe() for o in confirmed if not target.matches(o.signature)})
        ctx.talk.note(
            f"{what} reproduced in {describe_rate(rate.reproduced, rate.runs)} in fresh interpreters "
            "(otherwise: " + "; ".join(others[:3]) + "); each candidate is judged by a sequential test of its "
            "own rate against that one"
        )
        if runner.isolation is Isolation.FORK and runner.lanes == 1 and FLAKY_LANES > 1:
            runner.close()
            runner = lanes()
            if runner.lanes > 1:
                ctx.talk.stage(f"{runner.lanes} fork servers with different hash seeds, taken in turn")
    return rate, runner


def forked_walls(runner: Runner, files, target: Target, rate: float, env: Mapping[str, str], slow: bool = False,
                 fill: Path | None = None, limit: float = DEFAULT_FRESH_TIMEOUT) -> tuple[list[float], str | None]:
    """Run the original where candidates will run: its wall times, and why forking is not
    faithful for it (None when it is).  A deterministic original must reproduce every
    time; a flaky one at its own rate (the sequential test).

    ``fill`` (deterministic originals only): the first run leaves torch.compile's caches
    there, and when it compiled anything, the runs after it and every later one of
    ``runner`` start from a copy (``Runner.use_warm_caches``): those runs are what says
    whether the original still fails the same way with them."""
    walls: list[float] = []
    if rate >= 1.0:
        for i in range(1 if slow else CALIBRATION_RUNS):
            caches = compile_caches(fill) if fill is not None and i == 0 else {}
            forked = runner.run(files, timeout=limit, env={**env, **caches})
            if not target.matches(forked.signature):
                return walls, f"the original failed differently in a forked worker ({forked.describe()})"
            walls.append(forked.wall)
            if caches and 0 < cache_bytes(fill) <= WARM_CACHE_MAX:
                runner.use_warm_caches(fill)
        return walls, None
    test = RateTest(rate)
    while not test.decided:
        forked = runner.run(files, timeout=limit, env=env)
        test.add(target.matches(forked.signature))
        walls.append(forked.wall)
    if test.accepted:
        return walls, None
    return walls, (
        f"the original reproduced in {describe_rate(test.reproduced, test.runs)} in forked workers, "
        f"meaningfully less often than in fresh interpreters"
    )


def calibrate(ctx: Context, runner: Runner, measured: Measured, rate: Rate, target: Target, plan: WorkerPlan,
              fresh) -> tuple[list[float], Runner, WorkerPlan, str | None]:
    """Time the original where candidates will run, pinned as they will be: the same
    bug (at the same rate), or forking (or pinning) is not faithful here and every
    candidate runs fresh (``fresh(lanes)`` makes that runner; the last value says why)
    or sees every GPU."""
    files, wall = measured.files, measured.wall
    walls = [wall]
    if runner.isolation is not Isolation.FORK:
        return walls, runner, plan, None
    slow = calibration_runs(ctx, wall) == 1
    pin = plan.first_device
    fill = ctx.scratch.compile_caches if rate.value >= 1.0 else None
    # (each run within what --max-time leaves: the pool's slot was sized for them)
    limit = ctx.limits.clip(DEFAULT_FRESH_TIMEOUT)
    walls, why = forked_walls(runner, files, target, rate.value, pin, slow, fill, limit)
    if runner.warm_caches is not None:
        walls, why = check_warm_caches(ctx, runner, files, target, rate, walls, why, slow, pin)
    if why is not None and pin:
        unpinned, why_unpinned = forked_walls(runner, files, target, rate.value, {}, slow,
                                              limit=ctx.limits.clip(DEFAULT_FRESH_TIMEOUT))
        if why_unpinned is None:
            ctx.talk.note(
                f"pinned to one GPU the original failed differently ({why}); the script needs more "
                "devices than one, so candidates see every GPU, one at a time"
            )
            plan = dataclasses.replace(plan, gpus=(), jobs=1)
            walls, why = unpinned, None
    if why is not None:
        if ctx.config.isolation is Isolation.FORK:
            raise ReduceError(f"--isolation fork is not faithful for this script: {why}")
        ctx.talk.note(f"{why}; every candidate runs in a fresh interpreter, which is slower")
        lanes = runner.lanes
        runner.close()
        runner = fresh(lanes)
        runner.start()
        walls = [wall]
    return walls, runner, plan, why


def check_warm_caches(ctx: Context, runner: Runner, files, target: Target, rate: Rate, walls: list[float],
                      why: str | None, slow: bool, pin: Mapping[str, str]) -> tuple[list[float], str | None]:
    """The original's first calibration run compiled, and left its caches for the
    runs after it (``forked_walls``' ``fill``): candidates start with a copy only if the
    original fails the same way with them.  Compiling is most of a short compiled
    script's run (Inductor's code generation and C++ or Triton builds), and a
    candidate that keeps the failing graph finds it already built."""
    if why is None and slow:
        # the one run of a slow original filled them: one more says what they do
        check = runner.run(files, timeout=ctx.limits.clip(calibrated_timeout(walls)), env=pin)
        if not target.matches(check.signature):
            why = f"the original failed differently in a forked worker ({check.describe()})"
        else:
            walls = [*walls, check.wall]
    if why is not None:
        # Forking or the caches: the original runs again where candidates run, compiling
        # from nothing each time, and what it does then decides.
        runner.use_warm_caches(None)
        cold, cold_why = forked_walls(runner, files, target, rate.value, pin, slow,
                                      limit=ctx.limits.clip(DEFAULT_FRESH_TIMEOUT))
        if cold_why is None:
            ctx.talk.note(f"{why}, when it started with torch.compile's caches from an earlier run of it: every "
                          "candidate compiles from nothing")
        return cold, cold_why
    ctx.talk.note(
        f"torch.compile's caches from a run of the original ({cache_bytes(runner.warm_caches) / 2**20:.1f} MiB) "
        f"are copied into each candidate's directory: with them the original ran in {min(walls[1:]):.1f}s, "
        f"without them in {walls[0]:.1f}s"
    )
    return walls, None


def eager_contrast(ctx: Context, runner: Runner, measured: Measured, target: Target, plan: WorkerPlan,
                   calibration: Calibration) -> tuple[Contrast | None, str | None]:
    """For a torch.compile failure, the run that tells the compiler's bug from the
    program's: the original once with its compiled code run eagerly.  When that does
    not fail the same way, every candidate that reproduces is run that way too, and
    one that still fails alike is another bug (the oracle's contrast).  With it, how the
    original ran eagerly."""
    if target.signature.family is not Family.COMPILE:
        return None, None
    talk = ctx.talk
    watch = Watch(eager=True)
    # Eagerly the original runs on where compiling failed at once (the training after
    # it): it gets the limit of a whole run, not a candidate's.
    limit = max(calibration.timeout, calibration.fresh_timeout)
    obs = runner.run(measured.files, timeout=ctx.limits.clip(limit), env=plan.first_device, watch=watch)
    if obs.timed_out or obs.infra_error:
        talk.note(f"with its compiled code run eagerly the original did not end within {limit:.0f}s: candidates "
                  "are not asked to need the compiler")
        return None, "did not end"
    if target.matches(obs.signature):
        talk.note("the original fails the same way with its compiled code run eagerly: candidates are not "
                  "asked to need the compiler")
        return None, "fails the same way"
    passes = obs.signature is None and obs.exit_code == 0
    if passes:
        talk.note("with its compiled code run eagerly the original passes: a candidate must not fail that way "
                  "either, or its failure is a mistake of its own code, not the compiler's")
    else:
        failed = obs.signature.headline if obs.signature else obs.status
        talk.note(f"with its compiled code run eagerly the original fails with {failed}: "
                  "a candidate that fails the same way eagerly too is another bug")
    return Contrast(watch, passes), "passes" if passes else "fails otherwise"
