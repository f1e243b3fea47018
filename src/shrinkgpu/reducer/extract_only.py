"""``shrinkgpu extract``: the failing call alone, without a reduction."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from shrinkgpu.extract import ExtractionFailed, compiled_call, extract, extract_record, raised_record
from shrinkgpu.reducer.config import NotReproduced, ReduceConfig, ReduceError
from shrinkgpu.reducer.first_run import FirstRun, run_observed
from shrinkgpu.reducer.setup import main_source, spec_for
from shrinkgpu.results import Extraction
from shrinkgpu.signature import Target
from shrinkgpu.worker import ExecutorFactory, Isolation, Runner, Watch, default_executor


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
        return _extract_after(config, first, output, executors)
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def _extract_after(config: ReduceConfig, first: FirstRun, output: Path | None,
                   executors: ExecutorFactory) -> tuple[FirstRun, Extraction]:
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
