"""The library entry point: ``reduce(config)`` and ``run_once(spec)``.

Order of work, and why:

1. Run the original once in a *fresh* interpreter: this is the first error as the user
   sees it, and the run tells which modules to preload and which local files belong to
   the program.
2. Start the fork server with those modules and run the original again there: the
   signature must be the same bug, or forking is not faithful for this script and every
   candidate runs fresh instead.
3. Reduce: passes and ddmin (core) over candidates (syntax), judged by the oracle.
4. Verify the result in fresh interpreters, as plain ``python`` would run it; if it does
   not reproduce every time, fall back to the newest accepted state that does.
5. Write the output and the report; the input is never opened for writing.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import sys
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from shrinkgpu.core import Budget, Verdict, reduce_to_fixpoint
from shrinkgpu.core.rates import RateTest, describe_rate
from shrinkgpu.oracle import Oracle, OracleStats, Target
from shrinkgpu.passes import PASSES
from shrinkgpu.inputs import InputError, module_file, notebook_to_script, read_source, script_for_notebook
from shrinkgpu.report import BestSoFar, CollectEnv, PartialWriter, Reducing, Stage, read_partial, write_outputs
from shrinkgpu.extract import ExtractionFailed, extract
from shrinkgpu.families import Family, family_matches, is_asynchronous
from shrinkgpu.signature import Signature, Strictness
from shrinkgpu.syntax import Candidate, CutRecord, Facts, LoadRecord, ParseRecord, Program, SavedObject
from shrinkgpu.syntax.code import calls_named
from shrinkgpu.syntax.program import loop_facts
from shrinkgpu.worker import (
    ForkUnavailable,
    Isolation,
    Observation,
    PreloadReport,
    Runner,
    Sandbox,
    SandboxError,
    ScriptSpec,
    preload_candidates,
    sweep_stale_sessions,
    usable_cpus,
)
from shrinkgpu.worker.devices import visible_gpus

DEFAULT_FRESH_TIMEOUT = 600.0
TIMEOUT_FACTOR = 10.0
TIMEOUT_FLOOR = 5.0
TIMEOUT_CEILING = 600.0


class ReduceError(Exception):
    """The reduction cannot start; ``exit_code`` is what the CLI should return."""

    def __init__(self, message: str, exit_code: int = 1, observation: Observation | None = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.observation = observation


class NotReproduced(ReduceError):
    def __init__(self, message: str, observation: Observation | None):
        super().__init__(message, exit_code=3, observation=observation)


@dataclass(frozen=True)
class ReduceConfig:
    script: Path
    args: tuple[str, ...] = ()
    keep_error: str | None = None  # regex the first error must match
    output: Path | None = None  # default: <stem>.min.py beside the script
    timeout: float | None = None  # per candidate; default: calibrated from the original
    # None: fork when that is safe, else fresh, saying so; FORK: fork or fail; FRESH
    isolation: Isolation | None = None
    root: Path | None = None
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    stdin: bytes | None = None
    argv0: str | None = None
    strictness: Strictness = Strictness.STRICT
    verify_runs: int = 2
    confirm_runs: int = 1  # extra runs a reproducing candidate must pass
    confirm: int = 2  # extra fresh runs of the original before reducing (its reproduction rate)
    hash_seed: int | str | None = None  # PYTHONHASHSEED for every run; "original": one drawn for all
    module: str | None = None  # run as ``python -m module`` from cwd (``script`` is then ignored)
    resume: bool = False  # start from the partial result at ``output``, if it still reproduces
    extract: bool = True  # also write the failing call alone (<stem>.extracted.py)
    cut_library: bool = True  # offer a candidate that calls back the user object a library called
    save_objects: bool = True  # offer candidates that load the user's data objects the first run saved
    max_tests: int | None = None
    max_time: float | None = None
    keep_temp: bool = False
    write: bool = True
    jobs: int | None = None  # candidates at once; default: one per GPU, else cores / threads per run
    search: str = "probdd"  # or "ddmin"
    gpus: tuple[str, ...] | None = None  # pin workers to these devices; default: all visible
    # Synchronous kernel launches (CUDA_LAUNCH_BLOCKING=1 / AMD_SERIALIZE_KERNEL=3) for every
    # run: "auto" when the original's first error is an asynchronous GPU error (field
    # guide, rule 2), "always", or "never"
    sync_launches: str = "auto"
    family: Family | None = None  # keep a first error of this family (or one of its faces)


@dataclass
class ReductionResult:
    output: Path | None
    report: Path | None
    files: dict[str, str]
    main: str
    signature: Signature
    final_signature: Signature | None
    tokens_before: int
    tokens_after: int
    candidates_tested: int
    oracle: OracleStats
    seconds: float
    stopped: str | None
    verified: tuple[int, int]  # (reproduced, runs) in fresh interpreters
    isolation: Isolation
    preload_modules: int
    preload_seconds: float
    original_seconds: float
    timeout: float
    calibration: tuple[float, ...] = ()
    jobs: int = 1
    threads: int | None = None  # cap on each candidate's thread pools, None when uncapped
    gpus: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    passes: dict = field(default_factory=dict)
    launch_env: dict = field(default_factory=dict)  # {"CUDA_LAUNCH_BLOCKING": "1"} with --sync-launches
    surfaced: Signature | None = None  # where an asynchronous error surfaced without synchronous launches
    original_rate: tuple[int, int] = (1, 1)  # (reproduced, runs) of the original in fresh interpreters
    collect_env: str | None = None  # torch.utils.collect_env, run once in a fresh process
    needs: tuple[str, ...] = ()  # files beside it the result read in its verified runs
    in_place: str | None = None  # how the result ran where it was written, when that is elsewhere
    loops: tuple[tuple[str, int, int], ...] = ()  # (file, loop header line, iteration) of the failure
    extracted: object | None = None  # the failing call alone (extraction), when made
    data_files: dict = field(default_factory=dict)  # file name -> path: written beside the result
    # (file, name, class, bytes) of each data object the result loads instead of building
    loaded_objects: tuple[tuple[str, str, str, int], ...] = ()
    case: dict = field(default_factory=dict)  # what `verify` needs: how the original ran, what to keep
    trace: tuple[tuple[float, int], ...] = ()  # (seconds, tokens) at each accepted reduction
    extract_error: str | None = None  # why the failing call was not extracted

    def to_json(self) -> dict:
        return {
            "output": str(self.output) if self.output else None,
            "report": str(self.report) if self.report else None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(self.tokens_after / self.tokens_before, 4) if self.tokens_before else None,
            "candidates_tested": self.candidates_tested,
            "runs": self.oracle.runs,
            "cache_hits": self.oracle.cache_hits,
            "invalid_skipped": self.oracle.invalid,
            "verdicts": dict(self.oracle.by_verdict),
            "other_errors": dict(self.oracle.other_errors),
            "seconds": round(self.seconds, 3),
            "stopped_early": self.stopped is not None,
            "stop_reason": self.stopped,
            "verified": {"reproduced": self.verified[0], "runs": self.verified[1]},
            "isolation": self.isolation.value,
            "preloaded_modules": self.preload_modules,
            "timeout": self.timeout,
            "calibration_runs": list(self.calibration),
            "jobs": self.jobs,
            "threads_per_candidate": self.threads,
            "gpus": list(self.gpus),
            "signature": self.signature.to_json(),
            "final_signature": self.final_signature.to_json() if self.final_signature else None,
            "environment": self.environment,
            "notes": self.notes,
            "passes": self.passes,
            "launch_env": self.launch_env,
            "surfaced_signature": self.surfaced.to_json() if self.surfaced else None,
            "original_rate": {"reproduced": self.original_rate[0], "runs": self.original_rate[1]},
            "needs": list(self.needs),
            "loaded_objects": [
                {"file": f, "name": n, "class": c, "bytes": b} for f, n, c, b in self.loaded_objects
            ],
            "verified_where_written": self.in_place,
            # (seconds since the start, tokens) at the start of the search and at each
            # accepted reduction: when each size was reached
            "trace": [list(point) for point in self.trace],
            "extracted": None if self.extracted is None else {
                "script": str(self.extracted.path),
                "data": str(self.extracted.data) if self.extracted.data else None,
                "level": self.extracted.level,
                "lines": self.extracted.lines,
                "note": self.extracted.note,
            },
            "extract_error": self.extract_error,
        }


# -- helpers -----------------------------------------------------------------------------
def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ReduceError(f"--keep-error is not a valid regular expression: {exc}", exit_code=2) from exc


def spec_for(config: ReduceConfig) -> ScriptSpec:
    """How the user runs the script, and which directory every run gets a copy of.

    The copy is of the user's working directory when the script lies inside it (so
    ``cd repo && shrinkgpu reduce scripts/train.py`` finds ``data/`` as ``python`` does),
    unless that is the home directory or ``/``; else of the script's directory; or of
    ``--root``.  A notebook runs as the script of its code cells, under a name beside it
    that no file has; ``-m pkg.mod`` runs the module's file as ``python -m`` does."""
    cwd = (config.cwd or Path.cwd()).resolve()
    module = config.module
    if module is not None:
        try:
            script = module_file(module, cwd)
        except InputError as exc:
            raise ReduceError(str(exc), exit_code=2) from None
    else:
        script = Path(config.script)
        if not script.is_absolute():
            script = cwd / script
        if not script.exists():
            raise ReduceError(f"{config.script}: no such file", exit_code=2)
        if not script.is_file():
            raise ReduceError(f"{config.script}: not a file", exit_code=2)
    script = script.resolve()
    if script.suffix == ".ipynb":
        script = script_for_notebook(script)
    if config.root is not None:
        root = Path(config.root).resolve()
    elif module is not None or (_inside(script, cwd) and cwd not in (Path.home().resolve(), Path("/"))):
        root = cwd
    else:
        root = script.parent
    if not _inside(script, root):
        raise ReduceError(f"the script {script} is not inside --root {root}", exit_code=2)
    argv0 = config.argv0 if config.argv0 is not None else str(config.script)
    if module is None and Path(config.script).suffix == ".ipynb":
        argv0 = script.name
    return ScriptSpec(
        script=script, args=tuple(config.args), cwd=cwd, root=root, env=config.env, stdin=config.stdin,
        argv0=argv0, module=module,
    )


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.relative_to(directory)
        return True
    except ValueError:
        return False


def main_source(config: ReduceConfig, spec: ScriptSpec) -> tuple[str, tuple[str, ...]]:
    """The main program's text as Python would run it, and notes on how it was read."""
    named = Path(config.script) if config.module is None else spec.script
    if not named.is_absolute():
        named = spec.cwd / named
    try:
        if named.suffix == ".ipynb":
            notebook = notebook_to_script(named.resolve())
            return notebook.text, (f"the notebook {named.name}: its code cells, in order", *notebook.notes)
        return read_source(spec.script), ()
    except InputError as exc:
        raise ReduceError(str(exc), exit_code=2) from None


def imported_files(spec: ScriptSpec, config: ReduceConfig) -> list[Path]:
    """Local files the script's import statements name, found without running it (the
    first run tells the rest): what an output must never overwrite, known before any work."""
    import ast

    try:
        text, _ = main_source(config, spec)
        tree = ast.parse(text)
    except (ReduceError, SyntaxError, ValueError):
        return []
    bases = {spec.script.parent, spec.cwd, spec.root_dir}
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] if not node.level else []
        for name in names:
            parts = name.split(".")
            for base in bases:
                for depth in range(1, len(parts) + 1):
                    stem = base.joinpath(*parts[:depth])
                    found += [stem.with_suffix(".py"), stem / "__init__.py"]
    return [f for f in found if f.is_file()]


def check_output(output: Path, spec: ScriptSpec, protected: Iterable[Path] = ()) -> None:
    """Refuse, before any work, an output that would overwrite the input, a file of the
    program or one the script reads, or that cannot be a file; ``ReduceError`` (exit 2)."""
    report = output.with_suffix(".md") if output.suffix == ".py" else output.with_name(output.name + ".md")
    guarded = {spec.script.resolve(), *(Path(p).resolve() for p in protected)}
    for path in (output, report, output.with_suffix("")):
        if path.resolve() in (spec.script.resolve(), *(g for g in guarded if g.suffix == ".ipynb")):
            raise ReduceError(f"refusing to write the output over the input {path}", exit_code=2)
        if path.resolve() in guarded:
            raise ReduceError(
                f"refusing to write {path}: it is one of the script's own files (the input, a module it "
                "imports or a file it reads); choose another -o",
                exit_code=2,
            )
    if output.is_dir():
        raise ReduceError(f"-o {output}: is a directory; give a file name such as {output / 'repro.min.py'}", exit_code=2)
    for parent in output.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ReduceError(f"-o {output}: {parent} is a file, not a directory", exit_code=2)
            if not os.access(parent, os.W_OK):
                raise ReduceError(f"-o {output}: {parent} is not writable", exit_code=2)
            break


def launch_variable(environment: Mapping[str, object]) -> tuple[str, str]:
    """The variable that makes kernel launches synchronous for the torch build a run
    reported: ``AMD_SERIALIZE_KERNEL=3`` on ROCm (``torch.version.hip`` set), where the
    NVIDIA variable means nothing, else ``CUDA_LAUNCH_BLOCKING=1``."""
    if environment.get("hip"):
        return "AMD_SERIALIZE_KERNEL", "3"
    return "CUDA_LAUNCH_BLOCKING", "1"


def with_sync_launches(config: ReduceConfig, environment: Mapping[str, object]) -> tuple[ReduceConfig, tuple[str, str]]:
    """``config`` whose runs all see the synchronous-launch variable of that backend
    (field guide, rule 2: an asynchronous error surfaces at a later synchronising call;
    synchronous launches move it to the kernel that failed)."""
    name, value = launch_variable(environment)
    env = dict(os.environ if config.env is None else config.env)
    env[name] = value
    return dataclasses.replace(config, env=env), (name, value)


@dataclass(frozen=True)
class FirstRun:
    """The original as the reduction will treat it: its observation (localised when the
    error was asynchronous), the config every later run must use, the launch variable
    added, and where the error surfaced without it."""

    observation: Observation
    spec: ScriptSpec
    config: ReduceConfig
    launch: tuple[str, str] | None = None
    surfaced: Signature | None = None  # where Python saw an asynchronous error, before localising
    note: str | None = None


def with_hash_seed(config: ReduceConfig) -> ReduceConfig:
    """``config`` whose runs all get ``PYTHONHASHSEED`` from ``--hash-seed``: a number, or
    ``original``, one drawn now so that the original and the result run with the same."""
    seed = config.hash_seed
    if seed is None:
        return config
    if seed == "original":
        import random

        seed = random.randrange(1, 2**32 - 1)
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ReduceError(f"--hash-seed takes a number or 'original', not {seed!r}", exit_code=2) from None
    if not 0 <= value <= 2**32 - 1:
        raise ReduceError("--hash-seed must be between 0 and 4294967295", exit_code=2)
    env = dict(os.environ if config.env is None else config.env)
    env["PYTHONHASHSEED"] = str(value)
    return dataclasses.replace(config, env=env, hash_seed=value)


def launch_mode(config: ReduceConfig) -> str:
    mode = config.sync_launches
    if mode is True:
        return "always"
    if mode is False:
        return "never"
    return str(mode)


def run_observed(
    config: ReduceConfig,
    *,
    isolation: Isolation = Isolation.FRESH,
    collect: bool = True,
    count_loops: bool = False,
    sandbox: Sandbox | None = None,
    limit: float | None = None,
    cut: str | None = None,
    save_objects: str | None = None,
) -> FirstRun:
    """``run_once``, then, when launches must be synchronous (always, or by default when
    the first error is an asynchronous GPU error), a second run with the backend's
    variable (the first run tells which backend).  The second run's observation is the
    one the reduction keeps: an asynchronous error surfaces at a later synchronising call
    (``loss.item()``), and only the synchronous run names the operator whose kernel
    failed."""
    obs, spec = run_once(
        config, isolation=isolation, collect=collect, count_loops=count_loops, sandbox=sandbox, limit=limit, cut=cut,
        save_objects=save_objects,
    )
    mode = launch_mode(config)
    if mode == "never" or obs.infra_error:
        return FirstRun(obs, spec, config)
    sig = obs.signature
    if mode == "auto":
        if sig is None or not is_asynchronous(sig.type, sig.message, sig.kernel_assertion):
            return FirstRun(obs, spec, config)
        name, value = launch_variable(obs.environment)
        if (os.environ if spec.env is None else spec.env).get(name) == value:
            return FirstRun(obs, spec, config)  # the user's own environment already has it
    synced_config, variable = with_sync_launches(config, obs.environment)
    synced, spec = run_once(
        synced_config, isolation=isolation, collect=collect, count_loops=count_loops, sandbox=sandbox, limit=limit,
        cut=cut, save_objects=save_objects,
    )
    if mode == "always" or synced.infra_error:
        return FirstRun(synced, spec, synced_config, variable) if not synced.infra_error else FirstRun(obs, spec, config)
    if synced.signature is None or synced.signature.family is not sig.family:
        what = synced.signature.headline if synced.signature else synced.describe()
        return FirstRun(
            obs, spec, config,
            note=f"with synchronous launches ({variable[0]}={variable[1]}) the script ended otherwise ({what}); "
                 "the reduction keeps the error where it surfaced",
        )
    return FirstRun(synced, spec, synced_config, variable, surfaced=sig)


def default_output(script: Path) -> Path:
    return script.with_name(f"{script.stem}.min.py")


def run_once(
    config: ReduceConfig,
    *,
    isolation: Isolation = Isolation.FRESH,
    collect: bool = True,
    count_loops: bool = False,
    sandbox: Sandbox | None = None,
    limit: float | None = None,
    cut: str | None = None,
    save_objects: str | None = None,
) -> tuple[Observation, ScriptSpec]:
    """Run the script once, in a worker, and observe it (``shrinkgpu run``)."""
    spec = spec_for(config)
    text, _ = main_source(config, spec)
    files = {spec.script_rel: text}
    with Runner(spec, isolation=isolation, keep_temp=config.keep_temp, sandbox=sandbox) as runner:
        try:
            runner.start(required=isolation is Isolation.FORK)
        except ForkUnavailable as exc:
            raise ReduceError(f"--isolation fork is not possible here: {exc.reason}. {FORK_ADVICE}") from None
        timeout = min(config.timeout or DEFAULT_FRESH_TIMEOUT, limit or DEFAULT_FRESH_TIMEOUT)
        obs = runner.run(
            files, timeout=timeout, collect_modules=collect, collect_env=True, count_loops=count_loops, cut=cut,
            save_objects=save_objects,
        )
    return obs, spec


def _local_files(obs: Observation, spec: ScriptSpec, main_text: str | None = None) -> dict[str, str]:
    """The program: the script and the local Python files its run imported, read as
    Python reads them (their coding declarations)."""
    files = {spec.script_rel: main_text if main_text is not None else read_source(spec.script)}
    for _name, _file, local in obs.modules:
        if local is None or not local.endswith(".py") or local in files:
            continue
        original = spec.root_dir / local
        if original.is_file():
            try:
                files[local] = read_source(original)
            except InputError:
                continue
    return files


def facts_of(obs: Observation | None) -> Facts:
    """The run facts passes use, from an observation of that exact program."""
    if obs is None:
        return Facts()
    stack = obs.signature.stack if obs.signature is not None else ()
    parses = []
    for p in obs.parses:
        try:
            parses.append(
                ParseRecord(
                    file=p["file"],
                    line=int(p["line"]),
                    values=tuple(sorted(p["values"].items())),
                    known_args="parse_known_args" in p.get("caller", ""),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    loads = []
    for rec in obs.loads:
        try:
            if rec.get("literal"):
                loads.append(LoadRecord(rec["file"], int(rec["line"]), str(rec["function"]), str(rec["literal"])))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return Facts(stack=tuple(stack), parses=tuple(parses), loads=tuple(loads), seed_sites=tuple(obs.seed_sites))


def _loop_around_failure(program: Program) -> bool:
    """Whether a ``for`` statement encloses a line of the failing stack."""
    stmts = program.stmts
    for file, line in program.facts.stack:
        cur = program.deps.statement_at(file, line)
        while cur is not None:
            if stmts[cur].kind == "for":
                return True
            cur = stmts[cur].parent
    return False


CALIBRATION_RUNS = 3
# Runs of about the original's length that extraction takes (the capture, the checks).
EXTRACT_RUNS = 2
# An original that runs this long gets one calibration run, not CALIBRATION_RUNS: its
# timing is stable enough, and three more runs of a two-minute script are six minutes.
SLOW_ORIGINAL = 5.0
# Loops are counted again at a rebase only while a run of the program takes at most this.
RECOUNT_MAX_SECONDS = 5.0
# The search starts with loops that took this share of an original's run, when the run
# took at least HOT_MIN_SECONDS (below that, order hardly matters).
HOT_SHARE = 0.25
HOT_MIN_SECONDS = 1.0


def checks_reserve(verify_runs: int, extracting: bool, original_wall: float, result_wall: float,
                   import_seconds: float) -> float:
    """Seconds the search leaves under --max-time for what follows it: verifying runs the
    result ``verify_runs`` times in fresh interpreters; extracting runs the original once
    to save the call, then checks the extracted script (about one run of the result).
    The result's time falls as it shrinks (a training loop cut), so the reducer asks
    again at every reproducing candidate; the original's does not.  ``result_wall`` is
    a forked run's, which lacks a fresh interpreter's imports (``import_seconds``, the
    preload's time)."""
    fresh_result = min(original_wall, result_wall + import_seconds) + 0.5
    reserve = verify_runs * fresh_result
    if extracting:
        reserve += (original_wall + 0.5) + (EXTRACT_RUNS - 1) * fresh_result
    return reserve


def hot_loops(files: Mapping[str, str], loop_time) -> tuple[tuple[str, str, float], ...]:
    """(file, header text, share) of the loops that took at least HOT_SHARE of the run."""
    out = []
    for file, line, share in loop_time:
        lines = files.get(file, "").splitlines()
        if share >= HOT_SHARE and 1 <= line <= len(lines):
            out.append((file, lines[line - 1].strip(), share))
    return tuple(out)


FLAKY_SAMPLE = 10  # fresh runs that measure how often a flaky original fails
FLAKY_LANES = 4  # fork servers with their own hash seeds when the original is flaky


def _runs(
    runner: Runner, files, count: int, jobs: int, isolation: Isolation, timeout: float, env: Mapping[str, str]
) -> list[Observation]:
    """``count`` runs of ``files``, ``jobs`` at a time."""
    out: list[Observation] = []
    while len(out) < count:
        batch = [
            runner.submit(files, timeout=timeout, isolation=isolation, env=env)
            for _ in range(min(max(1, jobs), count - len(out)))
        ]
        out += [f.result() for f in batch]
    return out


def _calibrate(
    runner: Runner, files, target: Target, rate: float, env: Mapping[str, str], slow: bool = False
) -> tuple[list[float], str | None]:
    """Run the original where candidates will run: its wall times, and why forking is not
    faithful for it (None when it is).  A deterministic original must reproduce every
    time; a flaky one at its own rate (the sequential test)."""
    walls: list[float] = []
    if rate >= 1.0:
        for _ in range(1 if slow else CALIBRATION_RUNS):
            forked = runner.run(files, timeout=DEFAULT_FRESH_TIMEOUT, env=env)
            if not target.matches(forked.signature):
                return walls, f"the original failed differently in a forked worker ({forked.describe()})"
            walls.append(forked.wall)
        return walls, None
    test = RateTest(rate)
    while not test.decided:
        forked = runner.run(files, timeout=DEFAULT_FRESH_TIMEOUT, env=env)
        test.add(target.matches(forked.signature))
        walls.append(forked.wall)
    if test.accepted:
        return walls, None
    return walls, (
        f"the original reproduced in {describe_rate(test.reproduced, test.runs)} in forked workers, "
        f"meaningfully less often than in fresh interpreters"
    )


def pin_variable_for(env: Mapping[str, str] | None, environment: Mapping[str, object]) -> str:
    """The variable that pins a candidate to a device: the one the user restricted the
    devices with, if any (its values are what ``--gpus`` and the detection return), else
    the backend's own."""
    env = os.environ if env is None else env
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if env.get(name) is not None:
            return name
    return "HIP_VISIBLE_DEVICES" if environment.get("hip") else "CUDA_VISIBLE_DEVICES"
FORK_ADVICE = (
    "A module that starts threads or calls into CUDA when imported is the usual cause; "
    "'shrinkgpu reduce ... --isolation fork' stops with the reason instead, and "
    "--isolation fresh accepts the slower mode without this message"
)


def run_threads(environment: Mapping[str, object]) -> int:
    """Threads one run of the script uses for its pools, as its fresh run reported them."""
    counts = environment.get("threads") if isinstance(environment, Mapping) else None
    if not isinstance(counts, Mapping):
        return 1
    sizes = [v for k, v in counts.items() if k in ("torch", "blas") and isinstance(v, int)]
    return max([1, *sizes])


def plan_jobs(jobs: int | None, gpus: int, cores: int, per_run: int) -> tuple[int, int | None]:
    """Candidates at once, and the thread cap each gets (None: as python would size them).

    Never more threads than cores: jobs x threads per run <= cores.  By default a candidate
    keeps the thread counts of ``python script.py`` (a faithful run) and the jobs are what
    fits beside it; with GPUs, one job per GPU, and with ``-j``, what is asked: then each
    candidate's pools are capped to its share of the cores."""
    per_run = max(1, per_run)
    if jobs is None:
        jobs = gpus if gpus else max(1, cores // per_run)
    if jobs * per_run <= cores:
        return jobs, None
    return jobs, max(1, cores // jobs)


def calibrated_timeout(walls: list[float]) -> float:
    """A candidate's time limit: a multiple of the slowest of the original's runs in the
    same isolation, between a floor (scheduling noise on a busy machine) and a ceiling."""
    base = max(walls) if walls else DEFAULT_FRESH_TIMEOUT / TIMEOUT_FACTOR
    return min(TIMEOUT_CEILING, max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * base + 1.0))


# -- the reduction -----------------------------------------------------------------------
def reduce(config: ReduceConfig, on_event: Callable[[object], None] | None = None) -> ReductionResult:
    started = time.monotonic()
    pass_stats = PassStats()

    def emit(event: object) -> None:
        pass_stats(event)
        if on_event is not None:
            on_event(event)

    pattern = compile_pattern(config.keep_error)
    config = with_hash_seed(config)
    spec = spec_for(config)
    output = Path(config.output).resolve() if config.output else default_output(spec.script)
    check_output(
        output, spec,
        [*([Path(config.script).resolve()] if config.module is None else []), *imported_files(spec, config)],
    )
    versions = CollectEnv(sys.executable, spec.env) if config.write else None
    if config.write:
        # The best program so far is on disk at every moment: nothing is lost to an
        # interrupt, a SIGTERM or a crash.
        partial = PartialWriter(output)
        progress = emit

        def emit(event: object) -> None:
            partial(event)
            progress(event)

    exclude = [output, output.with_suffix(""), output.with_suffix(".md")]
    stale = sweep_stale_sessions()
    if stale:
        size = sum(n for _, n in stale) / 1e6
        emit(Stage(f"removed {len(stale)} temporary director{'y' if len(stale) == 1 else 'ies'} "
                   f"({size:.1f} MB) left by earlier runs that were killed: {stale[0][0]}"
                   + (" and others" if len(stale) > 1 else "")))
    try:
        # One copy of the user's directory serves every run of this reduction.
        sandbox = Sandbox(spec.root_dir, exclude=exclude, stdin=spec.stdin, keep=config.keep_temp)
    except SandboxError as exc:
        raise ReduceError(str(exc), exit_code=2) from None
    try:
        return _reduce(config, spec, output, sandbox, pattern, started, emit, pass_stats, versions)
    except BaseException:
        if config.write:
            partial.flush()  # whatever was found last, before the error or the signal
        raise
    finally:
        sandbox.close()
        if versions is not None:
            versions.close()


def _reduce(config, spec, output, sandbox, pattern, started, emit, pass_stats, versions=None) -> ReductionResult:
    deadline = None if config.max_time is None else started + config.max_time

    def left() -> float | None:
        """Seconds left of --max-time, which bounds the whole run, first run included."""
        return None if deadline is None else max(0.1, deadline - time.monotonic())

    main_text, input_notes = main_source(config, spec)
    for note in input_notes:
        emit(Stage(note))
    emit(Stage("running the original in a fresh interpreter"))
    # The first run also counts loop iterations (a line tracer: this run only).
    saved_call = sandbox.session / "call.pt"
    observe_first = functools.partial(
        run_observed, isolation=Isolation.FRESH, collect=True, count_loops=True, sandbox=sandbox,
        cut=str(saved_call) if config.cut_library else None,
        save_objects=str(sandbox.session / "objects") if config.save_objects else None,
    )
    initial_run = observe_first(config, limit=left())
    attempts = [initial_run.observation]
    # A flaky script may pass the first time: the --confirm runs may find its failure.
    while (
        attempts[-1].signature is None
        and not attempts[-1].infra_error
        and not attempts[-1].timed_out
        and len(attempts) <= config.confirm
    ):
        emit(Stage(f"the original did not fail (run {len(attempts)}); running it again (--confirm)"))
        initial_run = observe_first(config, limit=left())
        attempts.append(initial_run.observation)
    first, spec, config, launch = initial_run.observation, initial_run.spec, initial_run.config, initial_run.launch
    if first.infra_error:
        raise ReduceError(f"could not run the script: {first.infra_error}")
    if first.timed_out:
        bound = "--max-time" if deadline is not None and first.wall >= (config.max_time or 0) - 1 else "--timeout"
        raise NotReproduced(
            f"the original did not finish within {first.wall:.0f}s ({bound}); a script that runs longer needs "
            f"a larger --timeout (and --max-time), or a cut of its own that fails sooner",
            first,
        )
    if first.signature is None:
        runs = f" in {len(attempts)} runs" if len(attempts) > 1 else ""
        raise NotReproduced(f"the script did not fail{runs}: {first.describe()}", first)
    if pattern is not None and not pattern.search(first.signature.keep_text()):
        raise NotReproduced(
            f"the first error does not match --keep-error {pattern.pattern!r}:\n{first.signature.describe()}"
            + missing_file_hint(first.signature, spec),
            first,
        )
    if config.family is not None and not family_matches(
        config.family, first.signature.family, first.signature.kernel_assertion
    ):
        raise NotReproduced(
            f"the first error is not of the family {config.family.key!r} ({config.family.value}):\n"
            f"{first.signature.describe()}",
            first,
        )
    target = Target(first.signature, pattern, config.strictness, config.family)
    files = _local_files(first, spec, main_text)
    # Now that the run showed which files are the program's and which it reads, none of
    # them may be the output.
    check_output(output, spec, [spec.root_dir / rel for rel in (*files, *first.reads)])
    loops = loop_facts(files, first.loops)
    cut, data_files = _library_cut(first, spec, sandbox, saved_call)
    saved_objects, object_files = _saved_objects(first, spec, sandbox, output)
    data_files.update(object_files)
    hot = hot_loops(files, first.loop_time) if first.wall >= HOT_MIN_SECONDS else ()
    program = Program(
        files, spec.script_rel, facts=dataclasses.replace(
            facts_of(first), loops=loops, cut=cut, hot_loops=hot, saved_objects=saved_objects
        ),
    )
    notes: list[str] = list(input_notes)
    trace: list[tuple[float, int]] = []
    extract_error: str | None = None
    if initial_run.surfaced is not None:
        where = initial_run.surfaced.op.name if initial_run.surfaced.op else "a call that is not torch's"
        notes.append(
            f"the first error was asynchronous: without synchronous launches it surfaced at {where}; the "
            f"original was run again with {launch[0]}={launch[1]}, which put it at the operator whose kernel "
            "failed, and every candidate ran that way (timings under it say nothing about speed)"
        )
    elif launch is not None:
        notes.append(
            f"kernel launches were synchronous ({launch[0]}={launch[1]}) for the original and every "
            "candidate: the first error is where the failing kernel was launched"
        )
    if initial_run.note:
        notes.append(initial_run.note)
    if spec.cwd_rel is None:
        # No absolute paths in what goes to a maintainer (field guide, rule 8).
        notes.append(
            "the working directory was outside the script's directory (--root); candidates ran "
            "in a copy of the script's directory as their working directory"
        )

    def say(message: str) -> None:
        """A fact the user must see now (progress) and find later (the report's notes)."""
        notes.append(message)
        emit(Stage(message))

    gpus = config.gpus if config.gpus is not None else visible_gpus(spec.env)
    pin_variable = pin_variable_for(spec.env, first.environment)
    cores = usable_cpus()
    per_run = run_threads(first.environment)
    jobs, threads = plan_jobs(config.jobs, len(gpus), cores, per_run)
    if gpus and first.signature.family is Family.OUT_OF_MEMORY and jobs > len(gpus):
        # Two candidates on one device would each see the other's memory.
        jobs = len(gpus)
        say(f"out of memory: {jobs} candidate(s) at once, one per GPU, never two on one device")
    if threads is not None:
        say(
            f"{jobs} candidates at once on {cores} CPU cores: each runs with {threads} thread(s) where "
            f"python would use {per_run} (-j {max(1, cores // per_run)} keeps {per_run})"
        )
    required = config.isolation is Isolation.FORK
    isolation = config.isolation or Isolation.FORK
    pin0 = {pin_variable: gpus[0]} if gpus else {}

    def new_runner(mode: Isolation, lanes: int = 1) -> Runner:
        return Runner(
            spec, program_files=files, isolation=mode, keep_temp=config.keep_temp, sandbox=sandbox, threads=threads,
            lanes=lanes,
        )

    def start(r: Runner) -> PreloadReport:
        try:
            return r.start(modules, required=required)
        except ForkUnavailable as exc:
            raise ReduceError(f"--isolation fork is not possible here: {exc.reason}. {FORK_ADVICE}") from None

    runner = new_runner(isolation)
    try:
        emit(Stage("starting workers" + (" and preloading modules" if isolation is Isolation.FORK else "")))
        modules = preload_candidates(first.modules, [spec.root_dir])
        report = start(runner)
        if report.isolation is Isolation.FORK:
            emit(Stage(f"fork server ready: {len(report.modules)} modules preloaded in {report.seconds:.1f}s"))
        if report.dropped:
            say(
                "not preloaded, because forking after importing them is unsafe (each candidate imports "
                "them itself, which is slower): " + "; ".join(report.dropped)
            )
        if report.note:
            say(f"{report.note}: expect seconds per candidate instead of milliseconds. {FORK_ADVICE}")
        imported = {name for name, _file, _local in first.modules}
        if report.isolation is Isolation.FORK and "torch" in imported and "torch" not in report.modules:
            # Forking still works, but every candidate pays torch's import: a fallback in
            # all but name, and it must not be a silent one.
            torch_file = next((f for n, f, _ in first.modules if n == "torch"), None)
            # A preload candidate the server did not keep was dropped (the line above says why).
            why = ("Importing it made forking unsafe here (above): a module or an import hook that starts "
                   "threads when torch is imported is the usual cause." if "torch" in modules else
                   "It is preloaded when it is installed (site-packages), not one of your files.")
            say(f"torch ({torch_file}) is not preloaded: each candidate imports it itself (seconds instead of "
                f"milliseconds). {why}")

        # How often does the original fail, run as python runs it (a fresh interpreter:
        # new random seeds, a new hash seed each time)?  A result must fail as reliably.
        fresh_limit = calibrated_timeout([first.wall])
        confirmed = list(attempts)
        more = config.confirm - (len(attempts) - 1)
        if more > 0:
            emit(Stage(f"running the original {more} more time(s) in fresh interpreters"))
            confirmed += _runs(runner, files, more, jobs, Isolation.FRESH, fresh_limit, pin0)
        if config.confirm > 0 and not all(target.matches(o.signature) for o in confirmed):
            if len(confirmed) < FLAKY_SAMPLE:
                emit(Stage("the original does not fail every time: measuring how often"))
                confirmed += _runs(runner, files, FLAKY_SAMPLE - len(confirmed), jobs, Isolation.FRESH, fresh_limit, pin0)
        rate_ok = sum(target.matches(o.signature) for o in confirmed)
        original_rate = (rate_ok, len(confirmed))
        rate = rate_ok / len(confirmed)
        if rate < 1.0:
            others = sorted({o.describe() for o in confirmed if not target.matches(o.signature)})
            say(
                f"the original reproduced in {describe_rate(*original_rate)} in fresh interpreters (otherwise: "
                + "; ".join(others[:3]) + "); each candidate is judged by a sequential test of its own rate "
                "against that one"
            )
            if runner.isolation is Isolation.FORK and runner.lanes == 1 and FLAKY_LANES > 1:
                runner.close()
                runner = new_runner(Isolation.FORK, lanes=FLAKY_LANES)
                start(runner)
                if runner.lanes > 1:
                    emit(Stage(f"{runner.lanes} fork servers with different hash seeds, taken in turn"))

        walls = [first.wall]
        if runner.isolation is Isolation.FORK:
            # Time the original where candidates will run, pinned as they will be: the same
            # bug (at the same rate), or forking (or pinning) is not faithful here.
            slow = first.wall >= SLOW_ORIGINAL
            walls, why = _calibrate(runner, files, target, rate, pin0, slow)
            if why is not None and pin0:
                unpinned, why_unpinned = _calibrate(runner, files, target, rate, {}, slow)
                if why_unpinned is None:
                    say(
                        f"pinned to one GPU the original failed differently ({why}); the script needs more "
                        "devices than one, so candidates see every GPU, one at a time"
                    )
                    gpus, jobs, pin0, walls, why = (), 1, {}, unpinned, None
            if why is not None:
                if required:
                    raise ReduceError(f"--isolation fork is not faithful for this script: {why}")
                say(f"{why}; every candidate runs in a fresh interpreter, which is slower")
                runner.close()
                runner = new_runner(Isolation.FRESH, lanes=runner.lanes)
                runner.start()
                walls = [first.wall]
        timeout = config.timeout or calibrated_timeout(walls)
        oracle = Oracle(
            runner, target, timeout,
            fresh_timeout=fresh_limit,
            confirm=config.confirm_runs,
            gpus=gpus,
            rate=rate,
            pin_variable=pin_variable,
        )
        # --max-time covers the final checks and the extraction too: the search stops in
        # time to leave them what they take (checks_reserve).
        extracting = config.extract and config.write

        def search_deadline(result_wall: float) -> float | None:
            if deadline is None:
                return None
            return deadline - checks_reserve(config.verify_runs, extracting, first.wall, result_wall, report.seconds)

        # Before any candidate ran, the result is expected to take what the original took
        # outside its hot loops: they go first, and keeping four runs of a slow original
        # back would leave the search no time to cut them (the deadline follows the real
        # run times from the first reproducing candidate on).
        expected_wall = first.wall * (1.0 - max((share for _, _, share in hot), default=0.0))
        budget = Budget(max_tests=config.max_tests, deadline=search_deadline(expected_wall))

        def test(cand: Candidate) -> Verdict:
            return test_many([cand])[0]

        def test_many(cands: list[Candidate]) -> list[Verdict]:
            rendered: list = []
            for cand in cands:
                try:
                    rendered.append(cand.files)
                except Exception:  # an edit combination libcst cannot render
                    rendered.append(None)
            runnable = [files for files in rendered if files is not None]
            verdicts = iter(oracle.many(runnable)) if runnable else iter(())
            out = [Verdict.INVALID if files is None else next(verdicts) for files in rendered]
            if deadline is not None:
                # A reproducing candidate is what the search keeps: the time kept for the
                # final checks follows its run at once, not only when the pass ends.  (The
                # oracle's key of a candidate is Candidate.key, from files rendered here.)
                for files, verdict in zip(rendered, out):
                    seen = oracle.reproduced.get(tuple(sorted(files.items()))) if verdict == Verdict.REPRODUCED else None
                    if seen is not None:
                        budget.deadline = search_deadline(seen.wall)
            return out

        recordings = itertools.count(1)

        def rebase(cand: Candidate) -> Candidate:
            # The accepted candidate becomes the new original: fresh statement ids and
            # dependencies for its own text, and the facts of its own run.
            nonlocal saved_objects
            if not cand.edits:
                return cand
            files = cand.files
            emit(BestSoFar(dict(files), program.main, cand.size))
            trace.append((round(time.monotonic() - started, 3), cand.size))
            facts = facts_of(oracle.reproduced.get(cand.key))
            seen = oracle.reproduced.get(cand.key)
            # A loop stays worth cutting first while runs are still long.
            still_slow = seen is None or seen.wall >= HOT_MIN_SECONDS
            carried = dict(loops=loops, cut=cut, hot_loops=hot if still_slow else (), saved_objects=saved_objects)
            rebased = Program(files, program.main, facts=dataclasses.replace(facts, **carried))
            quick = seen is not None and seen.wall <= RECOUNT_MAX_SECONDS
            short = seen is None or seen.wall <= RECOUNT_MAX_SECONDS  # (no run seen: a cache hit)
            # The objects as this program builds them, not as the original did: the code
            # after them has been reduced against this program's data, and a load of the
            # original's object would often no longer fail the same way.  At every
            # rebase, so the file beside the program is never a stale one.
            save = short and saved_objects and not all(
                any(o.file in t for t in files.values()) for o in saved_objects
            )
            # Shrinking the data moves the failing item: count again, on this program (a
            # traced run: only while runs are short, or it costs more than it saves).
            count = quick and rebased.loop_iterations and _loop_around_failure(rebased)
            if save or count:
                # One run for both: the same program, observed once.
                again = runner.run(
                    files, timeout=timeout, count_loops=bool(count),
                    save_objects=str(sandbox.session / f"objects-{next(recordings)}") if save else None,
                )
                if target.matches(again.signature):
                    if count:
                        carried["loops"] = loop_facts(files, again.loops)
                    fresh, fresh_files = _saved_objects(again, spec, sandbox, output) if save else ((), {})
                    if fresh:
                        saved_objects = fresh
                        data_files.update(fresh_files)
                        carried["saved_objects"] = fresh
                    rebased = Program(files, program.main, facts=dataclasses.replace(facts, **carried))
            return rebased.initial()

        initial = program.initial()
        original_size = initial.size
        if config.resume:
            resumed = _resume_from(output, program, spec, runner, target, timeout, loops)
            if isinstance(resumed, str):
                say(resumed)
            else:
                say(f"resumed from the partial result at {output.name} ({resumed.size} tokens)")
                initial = resumed
        emit(Stage(f"reducing {initial.size} tokens (timeout {timeout:.1f}s per candidate)"))
        emit(Reducing(dict(initial.files), program.main, initial.size))
        trace.append((round(time.monotonic() - started, 3), initial.size))
        outcome = reduce_to_fixpoint(
            initial, PASSES, test, lambda c: c.order, budget=budget, on_event=emit, normalize=rebase,
            test_many=test_many, jobs=jobs, search=config.search,
        )

        runs = config.verify_runs
        if outcome.stopped == "interrupted" and runs:
            # The user wants out: write what we have now, and say it was not re-checked.
            notes.append("interrupted: the result was not re-checked in fresh interpreters")
            runs = 0
        elif deadline is not None and time.monotonic() >= deadline and runs:
            notes.append("--max-time was reached: the result was not re-checked in fresh interpreters")
            runs = 0
        else:
            emit(Stage("verifying the result in fresh interpreters"))
        stopped = outcome.stopped
        try:
            best, verified, final_sig = _verify(outcome.history, oracle, target, runs, notes, deadline)
        except KeyboardInterrupt:
            notes.append("interrupted while the result was re-checked: it was not verified")
            best, verified, final_sig, stopped = outcome.history[-1], (0, 0), None, "interrupted"
        extracted = None
        if config.extract and config.write and stopped != "interrupted" and (deadline is None or time.monotonic() < deadline):
            emit(Stage("extracting the failing call"))
            try:
                stem = output.with_suffix("") if output.suffix == ".py" else output
                stem = stem.with_name(stem.name.removesuffix(".min"))  # train.min.py -> train.extracted.py
                extracted = extract(runner, files, target, stem,
                                    oracle.fresh_timeout, env=spec.env, on_event=lambda m: emit(Stage(m)))
                if extracted.note:
                    notes.append(f"the extracted call is {extracted.note}")
            except ExtractionFailed as exc:
                notes.append(f"the failing call was not extracted: {exc.reason}")
                extract_error = exc.reason
            except KeyboardInterrupt:
                notes.append("interrupted while the failing call was extracted")
    finally:
        runner.close()

    result = ReductionResult(
        output=None,
        report=None,
        files=dict(best.files),
        main=program.main,
        signature=first.signature,
        final_signature=final_sig,
        tokens_before=original_size,
        tokens_after=best.size,
        candidates_tested=outcome.tests,
        oracle=oracle.stats,
        seconds=time.monotonic() - started,
        stopped=stopped,
        verified=verified,
        isolation=runner.isolation,
        preload_modules=len(report.modules),
        preload_seconds=report.seconds,
        original_seconds=first.wall,
        timeout=timeout,
        calibration=tuple(round(w, 4) for w in walls),
        jobs=jobs,
        threads=threads,
        gpus=tuple(gpus),
        environment=first.environment,
        notes=notes,
        launch_env={
            **(dict([launch]) if launch is not None else {}),
            **({"PYTHONHASHSEED": str(config.hash_seed)} if config.hash_seed is not None else {}),
        },
        surfaced=initial_run.surfaced,
        original_rate=original_rate,
        needs=tuple(sorted(set(oracle.verified_reads) - set(best.files))),
        extracted=extracted,
        extract_error=extract_error,
        trace=tuple(trace),
        data_files={name: str(path) for name, path in data_files.items()
                    if any(name in text for text in best.files.values())},
        loaded_objects=tuple((o.file, o.name, o.cls, o.size) for o in saved_objects
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
            "timeout_fresh": oracle.fresh_timeout,
        },
        loops=tuple(first.loops),
        passes=pass_stats.to_json(),
    )
    if config.write:
        result.collect_env = versions.result() if versions is not None else None
        write_outputs(result, output, spec)
        if verified[1] and _written_elsewhere(result.output, spec):
            result.in_place = _run_where_written(result, spec, target, oracle.fresh_timeout)
            write_outputs(result, output, spec)  # the report says how that went
    return result


def _written_elsewhere(written: Path, spec: ScriptSpec) -> bool:
    """Whether the result sits where the verification did not run it: another directory
    than the script's (the checks ran it in a copy of the script's directory)."""
    directory = written if written.is_dir() else written.parent
    return directory.resolve() != spec.script.parent.resolve()


def _run_where_written(result: ReductionResult, spec: ScriptSpec, target: Target, timeout: float) -> str:
    """Run the written result once, fresh, from its own directory (in a copy of it), as
    the report's reproduce line does; say whether it reproduced there."""
    written = result.output
    if written.is_dir():
        script, root, cwd = written / result.main, written, written
    else:
        script, root, cwd = written, written.parent, written.parent
    here = ScriptSpec(script=script, args=spec.args, cwd=cwd, root=root, env=spec.env, stdin=spec.stdin,
                      argv0=script.name if not written.is_dir() else result.main, module=spec.module)
    try:
        with Runner(here, isolation=Isolation.FRESH) as runner:
            runner.start()
            text = read_source(script)
            obs = runner.run({here.script_rel: text}, timeout=timeout)
    except (OSError, SandboxError, InputError) as exc:
        return f"not checked ({exc})"
    if target.matches(obs.signature):
        return "reproduces there too"
    missing = ", ".join(result.needs) if result.needs else "files the script reads"
    return (f"does NOT reproduce there ({obs.describe()}); it needs beside it what the checks had: {missing} "
            "(from the script's directory)")


def _verify(
    history: tuple, oracle: Oracle, target: Target, runs: int, notes: list[str], deadline: float | None = None
) -> tuple[Candidate, tuple[int, int], Signature | None]:
    """The newest accepted state that reproduces in every fresh run, with its record."""
    if runs <= 0:
        return history[-1], (0, 0), None

    failures: list[str] = []
    flaky = oracle.rate < 1.0

    def check(cand: Candidate) -> tuple[int, int, Signature | None]:
        """(reproduced, runs, a reproducing run's signature); ``runs`` in a row must all
        reproduce, or, for a flaky original, the sequential test must find the rate as
        good as the original's."""
        ok, n, sig = 0, 0, None
        test = RateTest(oracle.rate) if flaky else None
        while (n < runs) if test is None else not test.decided:
            if deadline is not None and time.monotonic() >= deadline and n:
                break  # --max-time bounds the check too; what ran is what is reported
            obs = oracle.observe(cand.files, isolation=Isolation.FRESH, timeout=oracle.fresh_timeout)
            n += 1
            if target.matches(obs.signature):
                ok += 1
                sig = obs.signature
            else:
                failures.append(obs.describe())
                if test is None:
                    break
            if test is not None:
                test.add(target.matches(obs.signature))
        return ok, n, sig

    def good(ok: int, n: int) -> bool:
        if not failures and ok == n and n:
            return True  # cut short by --max-time after reproducing every time it ran
        return ok == runs if not flaky else RateTest.judge(oracle.rate, ok, n)

    ok, n, sig = check(history[-1])
    if good(ok, n):
        if n < runs and not flaky:
            notes.append(f"--max-time cut the check short: the result reproduced in the {n} fresh run(s) made")
        return history[-1], (ok, n), sig
    notes.append(
        f"the smallest candidate reproduced in {ok} of {n} fresh runs ({failures[0]}); "
        "fell back to the newest larger candidate that reproduces "
        + ("as often as the original" if flaky else "every time")
    )
    # history[0] is the original, known to reproduce; search for the newest good state.
    sig = target.signature
    lo, hi = 0, len(history) - 1  # lo good, hi bad
    counted = (runs, runs)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_ok, mid_n, mid_sig = check(history[mid])
        if good(mid_ok, mid_n):
            lo, sig, counted = mid, mid_sig, (mid_ok, mid_n)
        else:
            hi = mid
    return history[lo], counted, sig


def _library_cut(first: Observation, spec: ScriptSpec, sandbox: Sandbox, saved: Path):
    """The first run's library cut as a fact for passes, its saved call beside the file
    that will load it (in every run's copy, and beside the result)."""
    cut = first.cut
    if not cut or not saved.is_file() or not cut.get("source"):
        return None, {}
    obj, setup = cut["object"], ""
    if obj.startswith("arg:"):
        # passed to the library without a name: its expression in the user's call
        _, position, param = obj.split(":", 2)
        expr = _argument_text(cut["source"], cut.get("entry", ""), int(position), param)
        if expr is None:
            return None, {}
        obj, setup = "_obj", f"_obj = {expr}\n"
    name = f"{spec.script.stem}.call.pt"
    rel = str(Path(cut["file"]).parent / name) if Path(cut["file"]).parent != Path(".") else name
    sandbox.add_file(rel, saved)
    call = f"{obj}.{cut['method']}" if cut.get("method") else obj
    replacement = (
        "import pathlib\nimport torch\n" + setup
        + f"_call = torch.load(pathlib.Path(__file__).with_name({name!r}), weights_only=False)\n"
        f"{call}(*_call['args'], **_call['kwargs'])\n"
    )
    return CutRecord(cut["file"], cut["source"], replacement, cut.get("library", "")), {name: saved}


def _saved_objects(first: Observation, spec: ScriptSpec, sandbox: Sandbox, output: Path):
    """The data objects a run saved, as facts for passes/data.py, each file beside the
    main script (in every run's copy, and beside the result).  Named after the result
    (``train.min.train_set.pkl``), like its report: a later reduction to the same
    output replaces them, and no name of the user's is taken."""
    records, files = [], {}
    main_dir = Path(spec.script_rel).parent
    base = output.stem if output.suffix == ".py" else output.name
    beside = output.parent if output.suffix == ".py" else output
    for saved in first.saved_objects:
        try:
            name, cls, path, size = saved["name"], saved["class"], Path(saved["path"]), int(saved["bytes"])
        except (KeyError, TypeError, ValueError):
            continue
        if not name.isidentifier() or not path.is_file():
            continue
        file_name = f"{base}.{name}.pkl"
        in_root = spec.root_dir / main_dir / file_name
        if file_name in files or (in_root.exists() and in_root.resolve() != (beside / file_name).resolve()):
            continue  # a file of the user's by that name is neither shadowed nor overwritten
        sandbox.add_file(str(main_dir / file_name) if main_dir != Path(".") else file_name, path)
        records.append(SavedObject(name, cls, file_name, size, str(main_dir) if main_dir != Path(".") else ""))
        files[file_name] = path
    return tuple(records), files


def _argument_text(source: str, function: str, position: int, keyword: str) -> str | None:
    """The text of the argument at ``position`` (or ``keyword=``) of the call of
    ``function`` in a statement's source."""
    import ast

    line = source.strip()
    for node in calls_named(line, function):
        if position < len(node.args) and not isinstance(node.args[position], ast.Starred):
            return ast.get_source_segment(line, node.args[position])
        for kw in node.keywords:
            if kw.arg == keyword:
                return ast.get_source_segment(line, kw.value)
    return None


def missing_file_hint(sig: Signature, spec: ScriptSpec) -> str:
    """For a first error about a file that is not there: where runs happen and how to fix it."""
    if sig.type not in ("FileNotFoundError", "NotADirectoryError", "OSError", "IsADirectoryError") and (
        "No such file" not in sig.message
    ):
        return ""
    return (
        f"\nEvery run works in a copy of {spec.root_dir} with the working directory at the same place "
        f"in it ({spec.cwd_rel or '.'}). If the script reads files outside that directory, give --root "
        "a directory that holds them, or run shrinkgpu from the directory you run python from."
    )


def _resume_from(output: Path, program: Program, spec: ScriptSpec, runner: Runner, target: Target,
                 timeout: float, loops) -> Candidate | str:
    """The partial result at ``output`` as the starting point, when it still reproduces;
    else a sentence saying why not."""
    files = read_partial(output, program.main)
    if files is None:
        return f"--resume: no partial result at {output}; starting from the original"
    obs = runner.run(files, timeout=timeout, count_loops=True)
    if not target.matches(obs.signature):
        return f"--resume: the partial result at {output.name} no longer reproduces ({obs.describe()}); starting from the original"
    facts = dataclasses.replace(facts_of(obs), loops=loop_facts(files, obs.loops) or loops)
    return Program(files, program.main, facts=facts).initial()



class PassStats:
    """Tests and tokens removed per pass: where the time goes, for the report."""

    def __init__(self):
        self.current = "setup"
        self.tests: dict[str, int] = {}
        self.accepted: dict[str, int] = {}
        self.removed: dict[str, int] = {}
        self.tokens: int | None = None

    def __call__(self, event: object) -> None:
        from shrinkgpu.core import PassStarted, Tested

        if isinstance(event, PassStarted):
            self.current = event.name
        elif isinstance(event, Tested):
            self.tests[self.current] = self.tests.get(self.current, 0) + 1
            if event.verdict.interesting:
                self.accepted[self.current] = self.accepted.get(self.current, 0) + 1
        elif isinstance(event, Reducing):
            self.tokens = event.tokens
        elif isinstance(event, BestSoFar):
            # Tokens of the programs, counted as people count them: the search's own
            # size is a weighted cost (blocks and loops cost extra), not tokens.
            if self.tokens is not None:
                self.removed[self.current] = self.removed.get(self.current, 0) + self.tokens - event.tokens
            self.tokens = event.tokens

    def to_json(self) -> dict:
        names = sorted(set(self.tests) | set(self.removed), key=lambda n: -self.tests.get(n, 0))
        return {
            n: {"tests": self.tests.get(n, 0), "reproduced": self.accepted.get(n, 0), "tokens_removed": self.removed.get(n, 0)}
            for n in names
        }


