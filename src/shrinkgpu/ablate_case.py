"""``shrinkgpu ablate RESULT``: the comparisons of a result already written, run again.

A result written by ``reduce`` (its case file beside it) is compared again, here and now,
with the same changes the reduction makes at its end (``shrinkgpu.ablation``): after an
upgrade of torch, on another machine, or on a GPU host for a case reduced on the CPU.
First the minimal case runs as written: if it does not fail with the recorded bug here,
no change can say anything, and that is the answer.  Then each change runs once in a
fresh interpreter, in a copy of the result's directory (the extracted call's in a copy
of its own, with its tensors).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Callable, Sequence

from shrinkgpu import ablation
from shrinkgpu.families import Family
from shrinkgpu.inputs import read_source
from shrinkgpu.results import Ablation
from shrinkgpu.signature import Strictness, Target
from shrinkgpu.verify import DEFAULT_TIMEOUT, case_spec, clean_env, load_case, target_of
from shrinkgpu.worker import ExecutorFactory, Isolation, Observation, Runner, ScriptSpec, default_executor
from shrinkgpu.worker.devices import visible_gpus

__all__ = ["NotReproducedHere", "ablate_case"]


class NotReproducedHere(Exception):
    """The minimal case does not fail with the recorded bug on this machine."""

    def __init__(self, observation: Observation):
        super().__init__(f"the minimal case does not fail with the recorded bug here: {observation.describe()}")
        self.observation = observation


def _runs(runner: Runner, changes: Sequence[ablation.Change], timeout: float, jobs: int) -> list[Observation]:
    return runner.run_all([(c.files, c.env) for c in changes], at_once=jobs, timeout=timeout,
                           isolation=Isolation.FRESH)


def ablate_case(result_path: Path, *, timeout: float | None = None, jobs: int | None = None,
                on_outcome: Callable[[ablation.Outcome], None] | None = None,
                executors: ExecutorFactory = default_executor) -> Ablation:
    """Run RESULT's comparisons again (``executors``: where, this machine's by default);
    raises CaseError for a missing or unreadable case file, NotReproducedHere when the
    case itself no longer fails the recorded way."""
    started = time.monotonic()
    case = load_case(result_path)
    recorded = target_of(case)
    target: Target = dataclasses.replace(recorded, strictness=Strictness.OPERATOR)
    limit = timeout or float(case.get("timeout_fresh") or DEFAULT_TIMEOUT)
    jobs = jobs or max(1, min(4, (os.cpu_count() or 2) // 2))
    env = clean_env()
    spec, text = case_spec(case, env)
    main = spec.script_rel
    files = {main: text}
    sig = target.signature
    compiled = sig.family is Family.COMPILE
    gpus = visible_gpus()
    found: list[ablation.Outcome] = []

    def record(outs: list[ablation.Outcome]) -> None:
        for o in outs:
            found.append(o)
            if on_outcome is not None:
                on_outcome(o)

    with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
        runner.start()
        baseline = runner.run(files, timeout=limit)
        if not target.matches(baseline.signature):
            raise NotReproducedHere(baseline)
        changes = ablation.compile_changes(files) if compiled else []
        changes += ablation.extension_changes(files, main)
        changes += ablation.program_changes(files, main, on_gpu=sig.on_gpu,
                                            launch_env=dict(case.get("launch_env") or {}))
        record(ablation.outcomes(changes, lambda cs: _runs(runner, cs, limit, jobs), target))

    call = case.get("extracted_call")
    extracted = Path(case["_dir"]) / case["extracted"] if case.get("extracted") else None
    if call and extracted is not None and extracted.is_file():
        arguments = [tuple(a) for a in call["arguments"]]
        changes = ablation.call_changes(read_source(extracted), call["op"], arguments, script=extracted.name,
                                        gpu_visible=bool(gpus))
        ext_spec = ScriptSpec(script=extracted, cwd=extracted.parent, root=extracted.parent, env=env,
                              argv0=extracted.name)
        with Runner(ext_spec, isolation=Isolation.FRESH, executors=executors) as runner:
            runner.start()
            record(ablation.outcomes(changes, lambda cs: _runs(runner, cs, limit, jobs), target))

    stage = ablation.summary([o for o in found if o.category == ablation.BACKEND],
                             ablation.compile_backend(files)) if compiled else None
    kind = ablation.kind_of(found, on_gpu=sig.on_gpu, compiled=compiled)
    return Ablation(tuple(found), kind.kind, kind.reason, kind.hint, stage, time.monotonic() - started)
