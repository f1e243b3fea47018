"""The failing call alone, in one room: what a reduction extracts before its search
(the extracted call is written after one run of a two-hour job, not at its end), and
``shrinkgpu extract``, which does only that.  The writing and the checks of an
extracted call are ``shrinkgpu.extract``'s.

A reduction extracts from the arguments its first run kept as the call raised
(``Watch.keep_raised``); a call it could not keep (a failed GPU kernel leaves nothing to
read) is captured by one more run of the original, before the call (``Watch.capture``),
which the run that saves the state at the failing step makes too (reducer/start.py).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shrinkgpu.extract import (
    ExtractionFailed,
    capture_of,
    compiled_call,
    extract,
    extract_record,
    raised_record,
    read_record,
)
from shrinkgpu.reducer import resume
from shrinkgpu.reducer.config import NotReproduced, ReduceConfig, ReduceError
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.first_run import FirstRun, run_observed
from shrinkgpu.reducer.setup import main_source, spec_for
from shrinkgpu.results import Extraction
from shrinkgpu.signature import Target
from shrinkgpu.worker import Capture, ExecutorFactory, Isolation, Observation, Runner, Watch, default_executor

EXTRACT_CHECK_MAX = 300.0  # seconds an extracted call's check may take (an import and one call)
# What one check of an extracted call takes, in units of this machine's import of torch
# (``Limits.startup``): a fresh interpreter, the probe, the import, one call.
EXTRACT_CHECK_STARTUPS = 2.0


@dataclass(frozen=True)
class Extracted:
    extraction: Extraction | None
    error: str | None  # why there is none


@dataclass(frozen=True)
class Extracting:
    """Extraction before the search: what is extracted so far, and the capture the next
    run of the original must take when the first run could not keep the call."""

    extracted: Extracted
    capture: Capture | None = None


def check_limit(ctx: Context, first: Observation) -> float:
    """An extracted call's check: an import of torch and one call, not a run of the original."""
    return min(ctx.limits.fresh_limit(first.wall), EXTRACT_CHECK_MAX)


def check_needs(ctx: Context) -> float:
    """Seconds one check of an extracted call takes here, about."""
    return EXTRACT_CHECK_STARTUPS * ctx.limits.startup


def check_timeouts(ctx: Context, first: Observation):
    """What gives each check of the extracted call its time limit, asked before each
    one: --max-time's slot for it, or ``ExtractionFailed`` saying why it is not started."""
    def timeout() -> float:
        slot = ctx.limits.slot("the check of the extracted call", check_needs(ctx), check_limit(ctx, first))
        if slot.refused:
            raise ExtractionFailed(slot.refused)
        return slot.timeout
    return timeout


def plan_extraction(ctx: Context, first: Observation, target: Target) -> Extracting:
    """The failing call written now when the first run kept its arguments as it raised
    (or --resume finds it written and still failing); else the capture to take."""
    config = ctx.config
    if not (config.extract and config.write):
        return Extracting(Extracted(None, None))
    kept = resume.kept_extraction(ctx, target, check_needs(ctx), check_limit(ctx, first)) if config.resume else None
    if kept is not None:
        return Extracting(Extracted(kept, None))
    op = target.signature.op
    if op is not None and op.name.startswith("torch.distributed."):
        return Extracting(not_extracted(
            ctx, f"the failing call is a collective ({op.name}): alone it has no peers to meet; the minimal example "
                 f"runs with its ranks ({ctx.spec.launch.command(ctx.spec.script_rel, ctx.spec.args)})"))
    try:
        record = raised_record(first.raised_calls, target.signature)
    except ExtractionFailed as exc:  # a compiled function that could not be written
        return Extracting(not_extracted(ctx, exc.reason))
    if record is not None:
        # A call the first run kept as it raised and that did not fail alone would not
        # fail alone from a capture either.
        return Extracting(extract_from(ctx, record, target, first))
    try:
        return Extracting(Extracted(None, None), capture_of(target.signature, ctx.scratch.capture))
    except ExtractionFailed as exc:
        return Extracting(not_extracted(ctx, exc.reason))


def finish_extraction(ctx: Context, extracting: Extracting, target: Target, first: Observation,
                      captured: Observation | None) -> Extracted:
    """The call the run before the search captured (``captured``: that run, None when it
    was not made), written alone."""
    capture = extracting.capture
    if capture is None or captured is None:
        return extracting.extracted
    if not Path(capture.path + ".json").is_file():
        return not_extracted(ctx, f"the call was not reached in the capture run ({captured.describe()})")
    try:
        return extract_from(ctx, read_record(Path(capture.path)), target, first)
    except ExtractionFailed as exc:
        return not_extracted(ctx, exc.reason)


def extract_from(ctx: Context, record: dict, target: Target, first: Observation) -> Extracted:
    """The failing call of ``record`` written alone, checked in a fresh interpreter."""
    ctx.talk.stage("extracting the failing call")
    try:
        extraction = extract_record(record, target, ctx.layout.extracted_stem, check_timeouts(ctx, first),
                                    ctx.spec.env, ctx.executors, on_event=ctx.talk.stage)
    except ExtractionFailed as exc:
        return not_extracted(ctx, exc.reason)
    ctx.talk.stage(f"the failing call alone is written: {extraction.path} (the search for the smallest program "
                   "follows)")
    if extraction.note:
        ctx.talk.note(f"the extracted call is {extraction.note}", show=False)
    return Extracted(extraction, None)


def not_extracted(ctx: Context, reason: str) -> Extracted:
    ctx.talk.note(f"the failing call was not extracted: {reason}", show=False)
    return Extracted(None, reason)


# -- shrinkgpu extract -----------------------------------------------------------------------------


def extracted_stem(output: Path | None, script: Path) -> Path:
    """``<dir>/<stem>`` of what ``extract -o`` writes: ``-o x.extracted.py`` or ``-o x.py``
    give ``x``; by default the script's own stem, beside it."""
    if output is None:
        return script.with_name(script.stem)
    output = Path(output)
    if output.name.endswith(".extracted.py"):
        return output.with_name(output.name[: -len(".extracted.py")])
    return output.with_suffix("")


def extract_call(
    config: ReduceConfig, output: Path | None = None, *, executors: ExecutorFactory = default_executor
) -> tuple[FirstRun, Extraction]:
    """Run the script once, then capture its failing call and write it alone
    (``<stem>.extracted.py``).  ``NotReproduced`` when the script does not fail or the
    call alone does not fail the same way."""
    kept = Path(tempfile.mkdtemp(prefix="shrinkgpu-raised-"))
    try:
        # The run keeps the arguments of the calls that raise: most calls fail alone from
        # them, and a module's own check of its inputs has no other way to be captured.
        first = run_observed(config, executors=executors, watch=Watch(keep_raised=str(kept)))
        return extracted_after(config, first, output, executors)
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def extracted_after(config: ReduceConfig, first: FirstRun, output: Path | None,
                    executors: ExecutorFactory) -> tuple[FirstRun, Extraction]:
    """The call ``first`` (a run that kept the raised calls' arguments) failed in,
    written alone beside ``output``; a capture run when those arguments do not fail alone."""
    obs = first.observation
    if obs.infra_error:
        raise ReduceError(f"could not run the script: {obs.infra_error}")
    if obs.signature is None:
        raise NotReproduced(f"the script did not fail: {obs.describe()}", obs)
    spec = spec_for(first.config)
    text, _ = main_source(first.config, spec)
    limit = config.timeout or max(30.0, 10 * obs.wall + 5)
    stem = extracted_stem(output, spec.script).resolve()
    try:
        record = raised_record(obs.raised_calls, obs.signature)
        if record is not None:
            try:
                return first, extract_record(record, Target(obs.signature), stem, limit, first.config.env, executors)
            except ExtractionFailed:
                if compiled_call(obs.signature):
                    raise  # (its inputs are read as it raises: there is no capture before it)
                # a capture before the call may still do it
        with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
            runner.start()
            extraction = extract(runner, {spec.script_rel: text}, Target(obs.signature), stem, limit,
                                 env=first.config.env)
    except ExtractionFailed as exc:
        raise NotReproduced(f"not extracted: {exc.reason}", obs) from None
    return first, extraction
