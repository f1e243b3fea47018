"""A fake executor for the reduction's phases: no process runs, each job's observation
comes from a Python function of the candidate's text, in microseconds.

``Behaviour`` is what the fake "script" does: ``behaviour(text, job) -> Observation``.
``bug(...)`` makes the Observation of a failing run, ``passes()`` one of a clean run.

With a ``FakeClock`` the runs take time: each observation's ``wall`` is how long its run
lasts, a run longer than its job's time limit comes back timed out at the limit (as the
supervisor kills it), and reading a run's result moves the clock to the run's end (runs
submitted together overlap, as they do in the workers).  A reduction given the same
clock (``Reduction(..., clock=clock)``) then meets --max-time exactly as it would on a
machine where the runs took those times, in microseconds.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shrinkgpu.families import classify_family
from shrinkgpu.signature import Frame, OpRecord, Signature, TensorMeta
from shrinkgpu.worker import (
    Dropped,
    Executor,
    Executors,
    ExecutorSettings,
    ForkUnavailable,
    Isolation,
    Job,
    Observation,
    PreloadReport,
    RunStatus,
)

Behaviour = Callable[[str, Job], Observation]


def signature(type_: str = "IndexError", message: str = "Target 4 is out of bounds.",
              op: str | None = "torch.nn.functional.cross_entropy", file: str = "train.py", line: int = 1,
              shape: tuple[int, ...] = (3, 4)) -> Signature:
    record = None
    if op is not None:
        record = OpRecord(op, (TensorMeta("args[0]", "float32", shape, (shape[-1], 1), "cpu"),), ())
    # an operator the probe's torch function mode saw raise is numbered (its first call here)
    return Signature(type_, message, message, record, Frame(file, line, "<module>", ""),
                     family=classify_family(type_, message, None), stack=((file, line),),
                     call=1 if op is not None else None)


def bug(sig: Signature | None = None, *, wall: float = 0.01, error_at: float | None = None, **facts) -> Observation:
    """A failing run of ``wall`` seconds; ``error_at``: when its error left the script (the
    rest is the probe saving what the watch asked), what a run stopped by its limit
    after that still says (with a ``FakeClock``)."""
    sig = sig or signature()
    if error_at is not None:
        facts = {**facts, "raised_before_timeout": sig, "failed_at": error_at}
    return Observation(1, None, False, wall, RunStatus.EXCEPTION, sig, duration=wall, **facts)


def passes(*, wall: float = 0.01) -> Observation:
    return Observation(0, None, False, wall, RunStatus.OK, None, duration=wall)


class FakeClock:
    """A monotonic clock the fake runs advance (``Limits``' clock in a test)."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def reach(self, moment: float) -> None:
        self.now = max(self.now, moment)


class ClockedFuture(Future):
    """A run's future whose result is there at once, and whose reading moves the clock
    to when the run ended."""

    def __init__(self, clock: FakeClock, end: float):
        super().__init__()
        self.clock = clock
        self.end = end

    def result(self, timeout=None):
        self.clock.reach(self.end)
        return super().result(timeout)


def within_limit(obs: Observation, job: Job) -> Observation:
    """What a run of ``obs.wall`` seconds comes back as under its job's time limit: killed
    at the limit, with the error it had raised before when that came first (``bug``'s
    ``error_at``, the probe's first record)."""
    if obs.wall <= job.timeout:
        return obs
    reached = obs.raised_before_timeout if obs.failed_at is not None and obs.failed_at <= job.timeout else None
    return Observation(None, 9, True, job.timeout, RunStatus.TIMEOUT, None, duration=job.timeout,
                       startup=obs.startup, raised_calls=obs.raised_calls if reached else (),
                       raised_before_timeout=reached)


@dataclass
class Log:
    """Every job the fake executors ran, in order, with the isolation that ran it."""

    jobs: list[tuple[Isolation, Job]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each job's script, as it was run
    started: list[Isolation] = field(default_factory=list)
    times: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each run, with a clock


class FakeExecutor(Executor):
    def __init__(self, isolation: Isolation, settings: ExecutorSettings, behaviour: Behaviour, log: Log,
                 refuse_fork: str | None = None, clock: FakeClock | None = None):
        self.isolation = isolation
        self.lanes = settings.lanes if isolation is Isolation.FORK else 1
        self.behaviour = behaviour
        self.log = log
        self.refuse_fork = refuse_fork
        self.clock = clock
        self._alive = False

    def start(self, preload=()) -> PreloadReport:
        if self.isolation is Isolation.FORK and self.refuse_fork:
            raise ForkUnavailable(self.refuse_fork, (Dropped("badmod", "started a thread"),))
        self._alive = True
        self.log.started.append(self.isolation)
        return PreloadReport(tuple(preload), (), 0.0, self.isolation)

    def submit(self, job: Job) -> Future:
        text = Path(job.request.script).read_text()
        self.log.jobs.append((self.isolation, job))
        self.log.texts.append(text)
        obs = self.behaviour(text, job)
        if self.clock is None:
            future: Future = Future()
        else:
            obs = within_limit(obs, job)
            self.log.times.append((self.clock.now, self.clock.now + obs.wall))
            future = ClockedFuture(self.clock, self.clock.now + obs.wall)
        future.set_result(obs)
        return future

    @property
    def alive(self) -> bool:
        return self._alive

    def close(self) -> None:
        self._alive = False


def executors(behaviour: Behaviour, log: Log | None = None, *, refuse_fork: str | None = None,
              clock: FakeClock | None = None):
    """An ``ExecutorFactory`` of fake executors sharing ``log`` (and ``clock``)."""
    return FakeExecutors(behaviour, log if log is not None else Log(), refuse_fork, clock)


class FakeExecutors(Executors):
    """The fake executors' factory; ``log`` is every job they ran."""

    def __init__(self, behaviour: Behaviour, log: Log, refuse_fork: str | None, clock: FakeClock | None):
        self.behaviour, self.log, self.refuse_fork, self.clock = behaviour, log, refuse_fork, clock

    def __call__(self, isolation: Isolation, settings: ExecutorSettings) -> Executor:
        return FakeExecutor(isolation, settings, self.behaviour, self.log, self.refuse_fork, self.clock)


# -- a small script and a reduction's context, for tests of the phases ---------------------------
SCRIPT = """\
import os
import sys


def helper(n):
    return n + 1


data = [1, 2, 3]
print("logging", data)
total = helper(3)
explode(3)
"""
NEEDLE = "explode(3)"


def fails_with_needle(text, job):
    return bug() if NEEDLE in text else passes()


def config(script: Path, **kw):
    """A reduction's config for ``script``: keep 'out of bounds', write nothing."""
    from shrinkgpu.reducer import ReduceConfig

    kw.setdefault("keep_error", "out of bounds")
    kw.setdefault("write", False)
    return ReduceConfig(script=script, cwd=script.parent, **kw)


class NoCollectEnv:
    """torch.utils.collect_env would run in a process of its own: not in these tests."""

    def __init__(self, python, env):
        pass

    def result(self, timeout: float = 0) -> str:
        return "PyTorch version: (not collected in this test)"

    def close(self) -> None:
        pass


class Contexts:
    """Makes the ``Context`` a reduction's phases read (``Reduction.prepare``), with fake
    executors, and closes what it made (the sandboxes) at the end of a test."""

    def __init__(self):
        self.made = []

    def __call__(self, cfg, behaviour: Behaviour = fails_with_needle, log: Log | None = None, on_event=None,
                 clock: FakeClock | None = None):
        from shrinkgpu.reducer import Reduction

        timed = {} if clock is None else {"clock": clock}
        reduction = Reduction(cfg, on_event, executors=executors(behaviour, log, clock=clock), **timed)
        ctx = reduction.prepare()
        self.made.append((reduction, ctx))
        return ctx

    def close(self) -> None:
        while self.made:
            reduction, ctx = self.made.pop()
            ctx.sandbox.close()
            if reduction.versions is not None:
                reduction.versions.close()
