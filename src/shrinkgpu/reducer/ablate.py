"""The ablation (a reduction's phase after the checks): the verified minimal case, and the
extracted call, with one change at a time, each run once in its own process (the field
guide's comparisons; ablation/): the outcomes and the kind of bug they show."""

from __future__ import annotations

import dataclasses
import time

from shrinkgpu import ablation
from shrinkgpu.families import Family
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.extraction import EXTRACT_CHECK_MAX, Extracted
from shrinkgpu.reducer.pool import Pool
from shrinkgpu.reducer.verification import Verified
from shrinkgpu.results import Ablation
from shrinkgpu.signature import Strictness, Target
from shrinkgpu.worker import Isolation, Watch


def ablate(ctx: Context, pool: Pool, verified: Verified, extracted: Extracted, target: Target,
           main: str) -> Ablation | None:
    """None when not asked (--no-ablate), when the result was not verified, at
    --max-time, or when no change applies."""
    best = verified.best
    if not ctx.config.ablate or not verified.counts[0] or ctx.limits.out_of_time():
        return None
    started = time.monotonic()
    talk, plan, runner = ctx.talk, pool.plan, pool.runner
    sig = target.signature
    # The changes alter dtypes, shapes and strides on purpose: the same bug is the same
    # class, message and operator.
    same = dataclasses.replace(target, strictness=Strictness.OPERATOR)
    on_gpu = sig.on_gpu
    compiled = sig.family is Family.COMPILE
    fresh: list[ablation.Change] = ablation.compile_changes(best.files) if compiled else []
    fresh += ablation.extension_changes(best.files, main)
    fresh += ablation.program_changes(best.files, main, on_gpu=on_gpu, launch_env=dict(ctx.spec.env or {}))
    extraction = extracted.extraction
    forked: list[ablation.Change] = []
    if extraction is not None and extraction.op and extraction.arguments:
        forked = ablation.call_changes(
            extraction.text, extraction.op, extraction.arguments, script=main,
            data=str(extraction.data.resolve()) if extraction.data else None, gpu_visible=bool(plan.gpus))
    changes = forked + fresh
    if not changes:
        return None
    talk.stage(f"one change at a time: {len(changes)} runs ({', '.join(c.name for c in changes)})")
    pin = plan.first_device

    # A change of the whole case that passes: what the call that failed in it (the N-th
    # of its operator in the minimal case, not in the original) returned there (a
    # compiled callable or a module's own check is no call the probe numbers).
    failed = verified.signature
    summarised = (Watch(output_of=(failed.op.name, failed.call))
                  if failed is not None and failed.op is not None and failed.call else Watch())

    def run_as(isolation: Isolation, timeout: float, watch: Watch = Watch()):
        return lambda batch: runner.run_all([(c.files, {**pin, **c.env}) for c in batch], at_once=plan.jobs,
                                            timeout=timeout, isolation=isolation, watch=watch)

    fresh_timeout = ctx.limits.fresh_timeout
    try:
        # The extracted call runs where candidates run (it is one import and one call); a
        # compiled case in a fresh interpreter, where Inductor's state is its own.
        found = ablation.outcomes(forked, run_as(runner.isolation, min(fresh_timeout, EXTRACT_CHECK_MAX)), same)
        found += ablation.outcomes(fresh, run_as(Isolation.FRESH, fresh_timeout, summarised), same)
    except KeyboardInterrupt:
        talk.note("interrupted while the result ran with one change at a time: no comparison", show=False)
        return None
    stage = ablation.summary([o for o in found if o.category == ablation.BACKEND],
                             ablation.compile_backend(best.files)) if compiled else None
    kind = ablation.kind_of(found, on_gpu=on_gpu, compiled=compiled)
    for o in found:
        talk.stage(f"  {o.change} ({o.subject}): {o.result}" + (f" ({o.error})" if o.error else "")
                   + (f" -> {o.output}" if o.output else ""))
    if stage:
        talk.stage(stage)
    talk.stage(f"the kind: {kind.kind}: {kind.reason}")
    return Ablation(tuple(found), kind.kind, kind.reason, kind.hint, stage, time.monotonic() - started)
