"""What a reduction is asked to do (``ReduceConfig``, frozen: the CLI fills it in), and
how it says it cannot start (``ReduceError``, with the exit code the CLI returns)."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from shrinkgpu.core import DEFAULT_SEARCH
from shrinkgpu.families import Family
from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.signature import Strictness
from shrinkgpu.worker import Isolation, Observation

LAUNCH_MODES = ("auto", "always", "never")


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
    observed_sizes: bool = True  # offer sizes and tensors as the first run saw them (passes/sizes.py)
    # a long original: save the state at the start of the failing iteration and offer
    # candidates that start there (passes/replay.py), once a fresh run showed it replays
    replay_state: bool = True
    # after the search, the minimal case run with one change at a time (ablation.py): for a
    # torch.compile failure, the backend, fullgraph, dynamic and compilation off
    ablate: bool = True
    max_tests: int | None = None
    max_time: float | None = None
    keep_temp: bool = False
    write: bool = True
    jobs: int | None = None  # candidates at once; default: one per GPU, else cores / threads per run
    search: str = DEFAULT_SEARCH  # "probdd" or "ddmin"
    gpus: tuple[str, ...] | None = None  # pin workers to these devices; default: all visible
    # Synchronous kernel launches (CUDA_LAUNCH_BLOCKING=1 / AMD_SERIALIZE_KERNEL=3) for every
    # run: "auto" when the original's first error is an asynchronous GPU error (field
    # guide, rule 2), "always", or "never"
    sync_launches: str = "auto"
    family: Family | None = None  # keep a first error of this family (or one of its faces)
    # how the script's processes start: one python, or torchrun's ranks on this machine
    # (--nproc-per-node, or the user's own torchrun command line)
    launch: Launch = PLAIN
    # a shell command that proposes whole programs (the best one so far on its stdin, one
    # JSON object a line back): a last tier of the search, judged like every candidate
    # (passes/external.py, reducer/proposer.py)
    propose_with: str | None = None


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ReduceError(f"--keep-error is not a valid regular expression: {exc}", exit_code=2) from exc


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


def checked_launch_mode(config: ReduceConfig) -> str:
    """``--sync-launches``, checked: one of LAUNCH_MODES."""
    if config.sync_launches not in LAUNCH_MODES:
        raise ReduceError(
            f"--sync-launches takes {', '.join(LAUNCH_MODES)}, not {config.sync_launches!r}", exit_code=2
        )
    return config.sync_launches
