"""A fake executor for the reduction's phases: no process runs, each job's observation
comes from a Python function of the candidate's text, in microseconds.

``Behaviour`` is what the fake "script" does: ``behaviour(text, job) -> Observation``.
``bug(...)`` makes the Observation of a failing run, ``passes()`` one of a clean run.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shrinkgpu.signature import Frame, OpRecord, Signature, TensorMeta
from shrinkgpu.families import classify_family
from shrinkgpu.worker import Dropped, Executor, ExecutorSettings, ForkUnavailable, Isolation, Job, Observation, PreloadReport, RunStatus

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


def bug(sig: Signature | None = None, *, wall: float = 0.01, **facts) -> Observation:
    return Observation(1, None, False, wall, RunStatus.EXCEPTION, sig or signature(), duration=wall, **facts)


def passes(*, wall: float = 0.01) -> Observation:
    return Observation(0, None, False, wall, RunStatus.OK, None, duration=wall)


@dataclass
class Log:
    """Every job the fake executors ran, in order, with the isolation that ran it."""

    jobs: list[tuple[Isolation, Job]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each job's script, as it was run
    started: list[Isolation] = field(default_factory=list)


class FakeExecutor(Executor):
    def __init__(self, isolation: Isolation, settings: ExecutorSettings, behaviour: Behaviour, log: Log,
                 refuse_fork: str | None = None):
        self.isolation = isolation
        self.lanes = settings.lanes if isolation is Isolation.FORK else 1
        self.behaviour = behaviour
        self.log = log
        self.refuse_fork = refuse_fork
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
        future: Future = Future()
        future.set_result(self.behaviour(text, job))
        return future

    @property
    def alive(self) -> bool:
        return self._alive

    def close(self) -> None:
        self._alive = False


def executors(behaviour: Behaviour, log: Log | None = None, *, refuse_fork: str | None = None):
    """An ``ExecutorFactory`` of fake executors sharing ``log``."""
    log = log if log is not None else Log()

    def make(isolation: Isolation, settings: ExecutorSettings) -> Executor:
        return FakeExecutor(isolation, settings, behaviour, log, refuse_fork)

    make.log = log  # type: ignore[attr-defined]
    return make


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

    def __call__(self, cfg, behaviour: Behaviour = fails_with_needle, log: Log | None = None, on_event=None):
        from shrinkgpu.reducer import Reduction

        reduction = Reduction(cfg, on_event, executors=executors(behaviour, log))
        ctx = reduction.prepare()
        self.made.append((reduction, ctx))
        return ctx

    def close(self) -> None:
        while self.made:
            reduction, ctx = self.made.pop()
            ctx.sandbox.close()
            if reduction.versions is not None:
                reduction.versions.close()
