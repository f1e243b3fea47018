"""The original, run once as the user runs it (``shrinkgpu run``, and a reduction's first
phase): where its first error is, with synchronous kernel launches when that error is
asynchronous (field guide, rule 2)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from shrinkgpu.families import is_asynchronous
from shrinkgpu.limits import Limits
from shrinkgpu.reducer.config import ReduceConfig, ReduceError, checked_launch_mode
from shrinkgpu.reducer.setup import main_source, spec_for
from shrinkgpu.signature import Signature
from shrinkgpu.worker import (
    ExecutorFactory,
    ForkUnavailable,
    Isolation,
    Observation,
    Runner,
    Sandbox,
    ScriptSpec,
    Watch,
    default_executor,
)

# The user's own run is not cut short by default: a job that fails after two hours is
# what shrinkgpu is for.  Only --timeout or --max-time bound it (a week stands for none:
# the workers take a number).
UNLIMITED = 7 * 24 * 3600.0
FORK_ADVICE = (
    "A module that starts threads or calls into CUDA when imported is the usual cause; "
    "'shrinkgpu reduce ... --isolation fork' stops with the reason instead, and "
    "--isolation fresh accepts the slower mode without this message"
)
# (every so many seconds, what to call with the seconds elapsed) while a run goes on
Waiting = tuple[float, Callable[[float], None]]
# What ``shrinkgpu run`` records of the original: its versions, not its modules.
RUN_WATCH = Watch(collect_env=True)


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


def run_once(
    config: ReduceConfig,
    *,
    isolation: Isolation = Isolation.FRESH,
    watch: Watch = RUN_WATCH,
    sandbox: Sandbox | None = None,
    limit: float | None = None,
    executors: ExecutorFactory = default_executor,
    waiting: Waiting | None = None,
) -> tuple[Observation, ScriptSpec]:
    """Run the script once, in a worker, and observe it.  ``waiting``: ``(seconds, call)``,
    ``call(elapsed)`` every ``seconds`` while the run goes on (a long original must not
    be silence)."""
    spec = spec_for(config)
    text, _ = main_source(config, spec)
    files = {spec.script_rel: text}
    with Runner(spec, isolation=isolation, keep_temp=config.keep_temp, sandbox=sandbox, executors=executors) as runner:
        try:
            runner.start(required=isolation is Isolation.FORK)
        except ForkUnavailable as exc:
            raise ReduceError(f"--isolation fork is not possible here: {exc.reason}. {FORK_ADVICE}") from None
        timeout = max(0.1, min(config.timeout or UNLIMITED, UNLIMITED if limit is None else limit))
        future = runner.submit(files, timeout=timeout, watch=watch)
        if waiting is not None:
            every, call = waiting
            started = time.monotonic()
            while True:
                try:
                    future.result(timeout=every)
                    break
                except concurrent.futures.TimeoutError:
                    call(time.monotonic() - started)
        obs = future.result()
    return obs, spec


def run_observed(
    config: ReduceConfig,
    *,
    isolation: Isolation = Isolation.FRESH,
    watch: Watch = RUN_WATCH,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
    executors: ExecutorFactory = default_executor,
    waiting: Waiting | None = None,
) -> FirstRun:
    """``run_once``, then, when launches must be synchronous (always, or by default when
    the first error is an asynchronous GPU error), a second run with the backend's
    variable (the first run tells which backend).  The second run's observation is the
    one the reduction keeps: an asynchronous error surfaces at a later synchronising call
    (``loss.item()``), and only the synchronous run names the operator whose kernel
    failed.  ``limits``: a reduction's (--max-time bounds the first run, which may be
    cut, and the second is not started when it could not end in time)."""
    mode = checked_launch_mode(config)
    again = dict(isolation=isolation, watch=watch, sandbox=sandbox, executors=executors, waiting=waiting)
    obs, spec = run_once(config, limit=limits.left() if limits is not None else None, **again)
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
    limit = None
    if limits is not None:
        slot = limits.slot("the original's run with synchronous launches", obs.wall, UNLIMITED)
        if slot.refused:
            return FirstRun(obs, spec, config, note=f"{slot.refused}: the reduction keeps the error where it surfaced")
        limit = slot.timeout
    synced, spec = run_once(synced_config, limit=limit, **again)
    if mode == "always" or synced.infra_error:
        return (FirstRun(synced, spec, synced_config, variable) if not synced.infra_error
                else FirstRun(obs, spec, config))
    if synced.signature is None or synced.signature.family is not sig.family:
        what = synced.signature.headline if synced.signature else synced.describe()
        return FirstRun(
            obs, spec, config,
            note=f"with synchronous launches ({variable[0]}={variable[1]}) the script ended otherwise ({what}); "
                 "the reduction keeps the error where it surfaced",
        )
    return FirstRun(synced, spec, synced_config, variable, surfaced=sig)
