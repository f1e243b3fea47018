"""The workers of a reduction: how many candidates at once, on which GPUs, with how many
threads each, and the original timed where candidates will run (is forking faithful
for it, and what is a candidate's time limit)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from shrinkgpu.core.rates import RateTest, describe_rate
from shrinkgpu.reducer.first_run import DEFAULT_FRESH_TIMEOUT
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation, Observation, Runner, cache_bytes, compile_caches

TIMEOUT_FACTOR = 10.0
TIMEOUT_FLOOR = 5.0
TIMEOUT_CEILING = 600.0
CALIBRATION_RUNS = 3
# An original that runs this long gets one calibration run, not CALIBRATION_RUNS: its
# timing is stable enough, and three more runs of a two-minute script are six minutes.
SLOW_ORIGINAL = 5.0
FLAKY_SAMPLE = 10  # fresh runs that measure how often a flaky original fails
FLAKY_LANES = 4  # fork servers with their own hash seeds when the original is flaky
# Compile caches past this size are not copied into every candidate's directory: the copy
# would cost what compiling saves, and jobs x this much disk.
WARM_CACHE_MAX = 512 * 2**20


def runs(
    runner: Runner, files, count: int, jobs: int, isolation: Isolation, timeout: float, env: Mapping[str, str]
) -> list[Observation]:
    """``count`` runs of ``files``, ``jobs`` at a time."""
    return runner.run_each([(files, env)] * count, at_once=jobs, timeout=timeout, isolation=isolation)


def calibrate(
    runner: Runner, files, target: Target, rate: float, env: Mapping[str, str], slow: bool = False,
    fill: Path | None = None,
) -> tuple[list[float], str | None]:
    """Run the original where candidates will run: its wall times, and why forking is not
    faithful for it (None when it is).  A deterministic original must reproduce every
    time; a flaky one at its own rate (the sequential test).

    ``fill`` (deterministic originals only): the first run leaves torch.compile's caches
    there, and when it compiled anything, the runs after it and every later one of
    ``runner`` start from a copy (``Runner.warm_caches``): those runs are what says
    whether the original still fails the same way with them."""
    walls: list[float] = []
    if rate >= 1.0:
        for i in range(1 if slow else CALIBRATION_RUNS):
            caches = compile_caches(fill) if fill is not None and i == 0 else {}
            forked = runner.run(files, timeout=DEFAULT_FRESH_TIMEOUT, env={**env, **caches})
            if not target.matches(forked.signature):
                return walls, f"the original failed differently in a forked worker ({forked.describe()})"
            walls.append(forked.wall)
            if caches and 0 < cache_bytes(fill) <= WARM_CACHE_MAX:
                runner.warm_caches = fill
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
    same isolation, between a floor (scheduling noise on a busy machine) and a ceiling.
    The ceiling is never under twice the slowest run: a run of the whole original (the
    one that saves the state, the replay's check) must be able to end."""
    base = max(walls) if walls else DEFAULT_FRESH_TIMEOUT / TIMEOUT_FACTOR
    return min(max(TIMEOUT_CEILING, 2.0 * base), max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * base + 1.0))


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
