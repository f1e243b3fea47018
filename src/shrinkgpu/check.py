"""``shrinkgpu check ORIGINAL CANDIDATE``: is a rewrite still the same bug?

An agent (or a person) that cuts a failing script by hand, or proposes a rewrite, needs
the oracle's answer without a reduction: is CANDIDATE the bug of ORIGINAL, by the rule
every reduction uses (``signature.Target``: ``--keep-error``, ``--family`` and the
``--strictness`` of ``Signature.same_bug``), and if not, which part differs.  A substring
of the message is how hand cuts and other reducers slip (the brief's 9-line result that
did not fail at all); so the answer names the part: the class, the message, the
operator, the dtype, device, shape or stride of its tensors, its other arguments, or the
rate (a cut that lost the seeding fails "most of the time").

Both run in fresh interpreters, as ``python`` runs them, each in a copy of its
directory:

1. The original, ``runs`` times (with synchronous kernel launches when its first error
   is asynchronous, as ``reduce`` does); a flaky one is measured over ``FLAKY_SAMPLE``
   runs.  What it showed (its first error, the dimensions its calls varied, its rate)
   is kept in a small file in the user's cache directory, keyed by its text and every
   option, so an agent iterating on one bug pays for the original once.
2. The candidate: when the original failed every time, it must fail the same way in
   every one of ``runs`` runs; when the original is flaky, the sequential rate test of
   ``core.rates`` decides, as it does for a reduction's candidates.

The candidate runs with the original's arguments, environment and launch variable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from shrinkgpu.core.rates import RateTest, describe_rate
from shrinkgpu.families import Family
from shrinkgpu.limits import calibrated_timeout
from shrinkgpu.reducer import ReduceConfig, ReduceError, main_source, run_observed, spec_for
from shrinkgpu.reducer.config import compile_pattern
from shrinkgpu.reducer.pool import FLAKY_SAMPLE
from shrinkgpu.signature import Signature, Strictness, Target, first_difference, varying_dims
from shrinkgpu.worker import ExecutorFactory, Isolation, Observation, Runner, ScriptSpec, Watch, default_executor

DEFAULT_RUNS = 3
CACHE_VERSION = 1
# What the original's first run records: its versions (the launch variable of its
# backend), the shapes its failing operator had across its calls (what it varied), and
# the modules it imported (its own ones, with the files it read, keep the cache honest).
ORIGINAL_WATCH = Watch(collect_env=True, op_shapes=True, collect_modules=True)
# Variables that change how a script runs on a device or in the interpreter: part of the
# cache key (PATH, a terminal's variables and the like are not).
RUN_VARIABLES = re.compile(r"^(CUDA|HIP|ROCR|HSA|AMD|NCCL|PYTORCH|TORCH|TORCHINDUCTOR|PYTHON|OMP|MKL|OPENBLAS"
                           r"|LD_LIBRARY_PATH|LD_PRELOAD|CUBLAS|CUDNN|TRITON)")
# Parts that say the candidate ran without the bug, rather than with another one.
NO_BUG = ("no error", "timeout")


class CheckError(Exception):
    """The check cannot be made; ``exit_code`` is what the CLI returns (2: the arguments,
    or an original that does not fail as asked; 1: a script that could not be run)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class CheckConfig:
    original: Path
    candidate: Path
    args: tuple[str, ...] = ()  # both scripts' arguments
    keep_error: str | None = None
    family: Family | None = None
    strictness: Strictness = Strictness.STRICT
    runs: int = DEFAULT_RUNS
    timeout: float | None = None  # per run; default: the original's, calibrated
    root: Path | None = None
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    stdin: bytes | None = None
    sync_launches: str = "auto"
    cache: Path | None = None  # the directory of the original's observations; None: none kept

    def run_config(self, script: Path, launch: tuple[str, str] | None = None) -> ReduceConfig:
        """How ``script`` runs: as the user runs the original (its arguments, directory,
        environment), with the original's launch variable."""
        env = dict(os.environ if self.env is None else self.env)
        sync = self.sync_launches
        if launch is not None:
            env[launch[0]] = launch[1]
            sync = "never"  # settled by the original's run
        return ReduceConfig(script=Path(script), args=self.args, keep_error=self.keep_error, timeout=self.timeout,
                            root=self.root, cwd=self.cwd, env=env, stdin=self.stdin, argv0=str(script),
                            strictness=self.strictness, family=self.family, sync_launches=sync)


@dataclass(frozen=True)
class Reference:
    """What the original showed in fresh interpreters: its first error, the dimensions its
    calls of the failing operator varied, how often it failed, the launch variable its
    runs needed and its run time.  What the cache keeps."""

    signature: Signature
    free: frozenset[tuple[str, int]]
    rate: tuple[int, int]  # (reproduced, runs)
    launch: tuple[str, str] | None
    wall: float
    # (path under the root, sha256) of the user's own modules the original imported and
    # the files it read: an entry of the cache stands only while they are unchanged
    files: tuple[tuple[str, str], ...] = ()

    @property
    def always(self) -> bool:
        return self.rate[0] == self.rate[1]

    def target(self, config: CheckConfig) -> Target:
        return Target(self.signature, compile_pattern(config.keep_error), config.strictness, config.family, self.free)

    def to_json(self) -> dict:
        return {"signature": self.signature.to_json(), "free": sorted([list(f) for f in self.free]),
                "rate": list(self.rate), "launch": list(self.launch) if self.launch else None,
                "wall": round(self.wall, 3), "files": [list(f) for f in self.files]}

    @classmethod
    def from_json(cls, data: dict) -> "Reference":
        return cls(
            signature=Signature.from_json(data["signature"]),
            free=frozenset((str(p), int(d)) for p, d in data.get("free", ())),
            rate=(int(data["rate"][0]), int(data["rate"][1])),
            launch=tuple(data["launch"]) if data.get("launch") else None,
            wall=float(data.get("wall", 0.0)),
            files=tuple((str(p), str(h)) for p, h in data.get("files", ())),
        )


@dataclass(frozen=True)
class Run:
    """One run of the candidate: ``part`` is None when it was the original's bug."""

    part: str | None
    headline: str  # its first error, or how it ended
    seconds: float
    signature: Signature | None

    @property
    def same(self) -> bool:
        return self.part is None

    def to_json(self) -> dict:
        return {"same_bug": self.same, "part": self.part, "first_error": self.headline,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Checked:
    """The answer: the same bug or not, the part that differs, in words, and the runs."""

    same_bug: bool
    part: str | None  # signature.PARTS, "keep-error", "family", "no error", "timeout" or "rate"
    detail: str
    reference: Reference
    runs: tuple[Run, ...]
    cached: bool  # the original's observation came from the cache
    signature: Signature | None  # the candidate's first error (of the run that decided)

    @property
    def reproduced(self) -> int:
        return sum(r.same for r in self.runs)

    def to_json(self) -> dict:
        return {
            "same_bug": self.same_bug,
            "part": self.part,
            "detail": self.detail,
            "candidate": {"reproduced": self.reproduced, "runs": len(self.runs),
                          "signature": self.signature.to_json() if self.signature else None,
                          "each": [r.to_json() for r in self.runs]},
            "original": {"reproduced": self.reference.rate[0], "runs": self.reference.rate[1],
                         "signature": self.reference.signature.to_json(),
                         "launch_env": dict([self.reference.launch]) if self.reference.launch else {},
                         "cached": self.cached},
        }


# -- the original, observed or read from the cache ------------------------------------------------
def default_cache() -> Path:
    """Where the original's observations are kept: ``$SHRINKGPU_CACHE_DIR``, else
    ``shrinkgpu/check`` in the user's cache directory (``$XDG_CACHE_HOME``, ``~/.cache``)."""
    own = os.environ.get("SHRINKGPU_CACHE_DIR")
    if own:
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shrinkgpu" / "check"


def cache_key(config: CheckConfig, spec: ScriptSpec, text: str) -> str:
    """The original's text and everything that changes how it runs or is judged."""
    try:
        from importlib.metadata import version

        ours = version("shrinkgpu")
    except Exception:  # a checkout run without being installed
        ours = "unknown"
    env = os.environ if config.env is None else config.env
    key = {
        "version": CACHE_VERSION, "shrinkgpu": ours, "python": sys.executable, "text": text,
        "script": str(spec.script), "root": str(spec.root_dir), "cwd": str(spec.cwd), "args": list(config.args),
        "keep_error": config.keep_error, "family": config.family.key if config.family else None,
        "strictness": config.strictness.value, "runs": config.runs, "timeout": config.timeout,
        "sync_launches": config.sync_launches,
        # (no stdin and an empty one read the same: the CLI's stdin is often an empty pipe)
        "stdin": hashlib.sha256(config.stdin).hexdigest() if config.stdin else None,
        "env": sorted((k, v) for k, v in env.items() if RUN_VARIABLES.match(k)),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def read_cached(path: Path) -> Reference | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Reference.from_json(data) if data.get("version") == CACHE_VERSION else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None  # missing, or written by another version: observed again


def write_cached(path: Path, ref: Reference) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": CACHE_VERSION, **ref.to_json()}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs the next call a run, nothing more


def digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def inputs_of(root: Path, obs: Observation, script: Path) -> tuple[tuple[str, str], ...]:
    """(path, sha256) of what the original's run read under ``root`` besides its own
    text (which the cache key holds): its local modules and its data files."""
    paths = {rel for _name, _file, rel in obs.modules if rel is not None} | set(obs.reads)
    mine = str(script.relative_to(root)) if script.is_relative_to(root) else None
    return tuple(sorted((rel, digest(root / rel)) for rel in paths if rel != mine))


def unchanged(root: Path, files: tuple[tuple[str, str], ...]) -> bool:
    return all(digest(root / rel) == sha for rel, sha in files)


def observe_original(config: CheckConfig, executors: ExecutorFactory, say: Callable[[str], None]) -> Reference:
    """The original in fresh interpreters: its first error, then ``runs`` runs in all
    (``FLAKY_SAMPLE`` when they do not all fail the same way).  ``CheckError`` (exit 2)
    when it does not fail as asked."""
    base = config.run_config(config.original)
    say("running the original in a fresh interpreter")
    attempts: list[Observation] = []
    while True:
        first = run_observed(base, isolation=Isolation.FRESH, watch=ORIGINAL_WATCH, executors=executors)
        obs = first.observation
        if obs.infra_error:
            raise CheckError(f"could not run the original: {obs.infra_error}")
        attempts.append(obs)
        if obs.signature is not None or obs.timed_out or len(attempts) >= config.runs:
            break
        say(f"the original did not fail (run {len(attempts)}); running it again")
    sig = obs.signature
    if sig is None:
        raise CheckError(f"the original did not fail in {len(attempts)} run(s): {obs.describe()}; there is no bug "
                         "to compare with", exit_code=2)
    free = varying_dims(sig.op, obs.op_shapes.get(sig.op.name, {})) if sig.op is not None else frozenset()
    read = inputs_of(first.spec.root_dir, obs, first.spec.script)
    ref = Reference(sig, free, (1, 1), first.launch, obs.wall, read)
    target = ref.target(config)
    why = target.mismatch(sig)
    if why == "keep-error":
        raise CheckError(f"the original's first error does not match --keep-error {config.keep_error!r}:\n"
                         f"{sig.describe()}", exit_code=2)
    if why == "family":
        raise CheckError(f"the original's first error is not of the family {config.family.key!r}:\n"
                         f"{sig.describe()}", exit_code=2)
    more = config.runs - len(attempts)
    seen = [target.matches(o.signature) for o in attempts]
    timeout = config.timeout or calibrated_timeout([obs.wall])
    if more > 0:
        say(f"running the original {more} more time(s) in fresh interpreters")
        seen += [target.matches(o.signature) for o in fresh_runs(first.spec, more, timeout, executors, config.runs)]
    if not all(seen) and len(seen) < FLAKY_SAMPLE:
        say("the original does not fail every time: measuring how often")
        seen += [target.matches(o.signature)
                 for o in fresh_runs(first.spec, FLAKY_SAMPLE - len(seen), timeout, executors, config.runs)]
    return dataclasses.replace(ref, rate=(sum(seen), len(seen)))


def reference(config: CheckConfig, executors: ExecutorFactory, say: Callable[[str], None]) -> tuple[Reference, bool]:
    """The original's observation, and whether it came from the cache."""
    spec = spec_for(config.run_config(config.original))
    text, _ = main_source(config.run_config(config.original), spec)
    path = config.cache / f"{cache_key(config, spec, text)}.json" if config.cache is not None else None
    if path is not None:
        kept = read_cached(path)
        if kept is not None and not unchanged(spec.root_dir, kept.files):
            say("the original's modules or data changed since its runs were kept: running it again")
            kept = None
        if kept is not None:
            say(f"the original: from the cache ({kept.signature.headline}; "
                f"{describe_rate(*kept.rate)})")
            return kept, True
    ref = observe_original(config, executors, say)
    if path is not None:
        write_cached(path, ref)
    return ref, False


# -- the candidate -------------------------------------------------------------------------------
def fresh_runs(spec: ScriptSpec, count: int, timeout: float, executors: ExecutorFactory, at_most: int,
               files: Mapping[str, str] | None = None) -> list[Observation]:
    """``count`` runs of ``spec``'s script in fresh interpreters, up to ``at_most`` (and the
    cores) at once."""
    with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
        runner.start()
        return batch(runner, spec, files, count, timeout, at_most)


def batch(runner: Runner, spec: ScriptSpec, files: Mapping[str, str] | None, count: int, timeout: float,
          at_most: int) -> list[Observation]:
    if files is None:
        text, _ = main_source(ReduceConfig(script=spec.script), spec)
        files = {spec.script_rel: text}
    at_once = max(1, min(at_most, os.cpu_count() or 1))
    out = runner.run_all([(files, {})] * count, timeout=timeout, isolation=Isolation.FRESH, at_once=at_once)
    for obs in out:
        if obs.infra_error:
            raise CheckError(f"could not run {spec.script.name}: {obs.infra_error}")
    return out


def part_of(target: Target, obs: Observation) -> str | None:
    """The part that keeps ``obs`` from being the target's bug (None: it is the bug)."""
    if obs.timed_out:
        return "timeout"
    sig = obs.signature
    if sig is None:
        return "no error"
    part = first_difference(target.signature, sig, target.strictness, target.free)
    return part if part is not None else target.mismatch(sig)


def judge_candidate(config: CheckConfig, ref: Reference, executors: ExecutorFactory,
                    say: Callable[[str], None]) -> list[Run]:
    """The candidate's runs: all ``runs`` must reproduce when the original always failed
    (stopping at the first that does not); for a flaky original, until the rate test
    decides."""
    run_config = config.run_config(config.candidate, ref.launch)
    spec = spec_for(run_config)
    text, _ = main_source(run_config, spec)
    files = {spec.script_rel: text}
    target = ref.target(config)
    timeout = config.timeout or calibrated_timeout([ref.wall])
    test = None if ref.always else RateTest(ref.rate[0] / ref.rate[1])
    step = max(1, min(config.runs, os.cpu_count() or 1))
    say(f"running the candidate in fresh interpreters ({config.runs} runs)" if test is None else
        f"running the candidate until its rate is told from the original's ({describe_rate(*ref.rate)})")
    runs: list[Run] = []
    with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
        runner.start()
        while True:
            count = min(step, config.runs - len(runs)) if test is None else step
            for obs in batch(runner, spec, files, count, timeout, step):
                part = part_of(target, obs)
                headline = obs.signature.headline if obs.signature is not None else obs.describe()
                runs.append(Run(part, headline, obs.wall, obs.signature))
                if test is not None:
                    test.add(part is None)
            if test is None and (len(runs) >= config.runs or not all(r.same for r in runs)):
                return runs
            if test is not None and test.decided:
                return runs


def verdict(config: CheckConfig, ref: Reference, runs: list[Run]) -> tuple[bool, str | None, str, Signature | None]:
    """(same bug, the part that differs, in words, the candidate's first error that decided)."""
    reproduced = sum(r.same for r in runs)
    same = reproduced == len(runs) if ref.always else bool(RateTest.judge(ref.rate[0] / ref.rate[1], reproduced,
                                                                           len(runs)))
    rates = f"the candidate reproduced in {describe_rate(reproduced, len(runs))}, the original in " \
            f"{describe_rate(*ref.rate)}"
    if same:
        first = next((r for r in runs if r.same), runs[0])
        return True, None, rates, first.signature
    other = next((r for r in runs if not r.same and r.part not in NO_BUG), None)
    if other is not None:
        return False, other.part, describe_part(other.part, ref, config, other), other.signature
    missed = next(r for r in runs if not r.same)
    if reproduced:
        return False, "rate", f"{rates}; otherwise: {missed.headline}", missed.signature
    return False, missed.part, f"{missed.part}: {missed.headline} (in {len(runs)} run(s))", None


def describe_part(part: str, ref: Reference, config: CheckConfig, run: Run) -> str:
    """What differs, in words: the original's value against the candidate's."""
    mine, theirs = ref.signature, run.signature
    if part == "keep-error":
        return f"keep-error: the first error does not match {config.keep_error!r}: {run.headline}"
    if part == "family":
        return f"family: {theirs.family.value} is not a face of {config.family.key!r}: {run.headline}"
    if part == "class":
        return f"class: {theirs.type} instead of {mine.type} ({run.headline})"
    if part == "message":
        return f"message: {theirs.headline!r} instead of {mine.headline!r}"
    if part == "operator":
        return f"operator: {operator_name(theirs)} instead of {operator_name(mine)}"
    if part in ("dtype", "device", "shape", "stride") and mine.op and theirs.op:
        changed = [f"{b.path}: {getattr(b, part)} instead of {getattr(a, part)}"
                   for a, b in zip(mine.op.tensors, theirs.op.tensors) if getattr(a, part) != getattr(b, part)]
        return f"{part} at {mine.op.name}: " + ("; ".join(changed) or "a batch dimension changed unevenly")
    said = mine.differences(theirs)
    return f"{part}: " + ("; ".join(said) if said else run.headline)


def check(config: CheckConfig, *, executors: ExecutorFactory = default_executor,
          on_stage: Callable[[str], None] | None = None) -> Checked:
    """Is ``config.candidate`` the bug of ``config.original``?  ``on_stage`` sees what is
    being run.  ``CheckError`` when it cannot be told."""
    say = on_stage or (lambda message: None)
    if config.runs < 1:
        raise CheckError("--runs must be at least 1", exit_code=2)
    try:
        compile_pattern(config.keep_error)
        ref, cached = reference(config, executors, say)
        runs = judge_candidate(config, ref, executors, say)
    except ReduceError as exc:
        raise CheckError(str(exc), exit_code=exc.exit_code if exc.exit_code != 3 else 2) from None
    same, part, detail, sig = verdict(config, ref, runs)
    return Checked(same, part, detail, ref, tuple(runs), cached, sig)


def operator_name(sig: Signature) -> str:
    return sig.op.name if sig.op is not None else "no torch call"
