"""The ablation (a reduction's phase after the checks): the verified minimal case, and the
extracted call, with one change at a time, each run once in its own process (the field
guide's comparisons; ablation/): the outcomes and the kind of bug they show."""

from __future__ import annotations

import dataclasses
import itertools

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
    if not ctx.config.ablate or not verified.counts[0]:
        return None
    limits = ctx.limits
    started = limits.now()
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

    refused: list[str] = []

    def run_as(isolation: Isolation, timeout: float, needs: float, watch: Watch = Watch()):
        def run(batch: list[ablation.Change]):
            # A batch at a time (what runs at once), each asking --max-time first: the
            # comparisons that could not end in time are not started, and said.
            out = []
            for k in range(0, len(batch), plan.jobs):
                part = batch[k:k + plan.jobs]
                slot = limits.slot(f"the run with one change at a time ({part[0].name})", needs, timeout)
                if slot.refused:
                    refused.append(f"{slot.refused} (and {len(batch) - k - 1} more comparison(s) after it)"
                                   if len(batch) - k > 1 else slot.refused)
                    break
                ran = runner.run_all([(c.files, {**pin, **c.env}) for c in part], timeout=slot.timeout,
                                     isolation=isolation, watch=watch)
                # a run the end of --max-time stopped compares nothing: not an outcome
                kept = [o for o in itertools.takewhile(lambda o: not (o.timed_out and limits.out_of_time()), ran)]
                out += kept
                if len(kept) < len(ran):
                    refused.append(f"the run with one change at a time ({part[len(kept)].name}) was stopped by "
                                   "--max-time: it and the comparisons after it are left out")
                    break
            return out
        return run

    fresh_timeout = limits.fresh_timeout
    try:
        # The extracted call runs where candidates run (it is one import and one call); a
        # compiled case in a fresh interpreter, where Inductor's state is its own.
        found = ablation.outcomes(forked, run_as(runner.isolation, min(fresh_timeout, EXTRACT_CHECK_MAX),
                                                 limits.candidate_wall), same)
        if not refused:
            found += ablation.outcomes(fresh, run_as(Isolation.FRESH, fresh_timeout, verified.wall, summarised),
                                       same)
    except KeyboardInterrupt:
        talk.note("interrupted while the result ran with one change at a time: no comparison", show=False)
        return None
    for why in refused:
        talk.note(why)
    if not found:
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
    return Ablation(tuple(found), kind.kind, kind.reason, kind.hint, stage, limits.now() - started)
