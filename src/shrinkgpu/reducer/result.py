"""The result (a reduction's last phase): the ``ReductionResult``, and with ``write`` its
files, report and case file where the layout says; when it is written elsewhere than
the script's directory, one run from where it is."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from shrinkgpu.launch import Launch
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.alone import Alone
from shrinkgpu.reducer.context import Context
from shrinkgpu.reducer.extraction import Extracted
from shrinkgpu.reducer.facts import Input
from shrinkgpu.reducer.first_run import FirstRun
from shrinkgpu.reducer.pool import Pool
from shrinkgpu.reducer.search import Searched
from shrinkgpu.reducer.start import Start
from shrinkgpu.reducer.verification import Verified, run_where_written, written_elsewhere
from shrinkgpu.report import CollectEnv, place_needed_files, write_outputs
from shrinkgpu.results import Ablation, ReductionResult
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Candidate, StateRecord
from shrinkgpu.worker import Isolation, Observation

# Seconds the report waits for collect_env (started with the reduction) when no
# --max-time bounds it.
COLLECT_ENV_WAIT = 120.0


@dataclass(frozen=True)
class Found:
    """Everything the phases before the result returned that the result reports."""

    first: FirstRun
    target: Target
    inp: Input
    start: Start
    pool: Pool
    oracle: Oracle
    searched: Searched
    verified: Verified
    extracted: Extracted
    ablated: Ablation | None
    passes: dict  # tests and tokens removed per pass (reducer/stats.py)
    launch: Launch  # how the result runs: torchrun's ranks, or one python (reducer/world.py)
    user_first: Observation  # the original's run as the user launched it (its world, its first failing rank)
    alone: Alone | None = None  # which artifact runs alone (reducer/alone.py)


def finish(ctx: Context, found: Found, versions: CollectEnv | None, revision: str | None) -> ReductionResult:
    """The result, and with ``write`` its files, report and case file."""
    config, spec, talk = ctx.config, ctx.spec, ctx.talk
    best, verified = found.verified.best, found.verified
    bought = ctx.limits.would_buy()
    if bought:
        talk.note(bought)
    modules = sorted(p for p in best.files if p.endswith(".py"))
    if config.write and len(best.files) > 1:
        talk.note(
            f"the result still needs {len(modules)} files ({', '.join(modules)}), so it is the directory "
            f"{ctx.layout.directory}/, not {ctx.layout.output.name}"
        )
    result = result_of(ctx, found)
    state = found.start.state
    if config.write and state is not None and state.state_file not in result.data_files:
        # The user's weights are not left beside a result that does not read them.
        for leftover in ctx.layout.state:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
    elif config.write and state is not None and state.files_dir not in result.data_files:
        # the result kept the state but not the files the run wrote before it
        shutil.rmtree(ctx.layout.state[2], ignore_errors=True)
    if config.write:
        # (collect_env started with the reduction; past --max-time it gets a moment of
        # the grace, else the report says the versions were not collected)
        result.collect_env = versions.result(ctx.limits.wait(COLLECT_ENV_WAIT)) if versions is not None else None
        result.revision = revision
        write_outputs(result, ctx.layout, spec)
        if result.output.is_dir():
            talk.stage(f"run it with: {result.command}")
        if verified.counts[1] and written_elsewhere(result.output, spec):
            # The command the report prints must run as printed: what the result reads
            # goes beside it (or the command runs it where its data is).
            place_needed_files(result, spec)
            slot = ctx.limits.slot("the run of the result where it is written", verified.wall,
                                   ctx.limits.fresh_timeout)
            result.in_place = (run_where_written(result, spec, found.target, slot.timeout, executors=ctx.executors)
                               if slot.timeout is not None else f"not checked: {slot.refused}")
            write_outputs(result, ctx.layout, spec)  # the report says how that went
    return result


def result_of(ctx: Context, found: Found) -> ReductionResult:
    config, spec = ctx.config, ctx.spec
    first_run, verified, pool, searched = found.first, found.verified, found.pool, found.searched
    first, best = first_run.observation, verified.best
    launch = first_run.launch
    # beside the program: what its first run saved, the state it starts from, the data
    # objects saved again as it shrank (a later file of a name replaces an earlier one)
    saved = {**found.inp.data_files, **found.start.data_files, **searched.data_files}
    data_files = {name: str(path) for name, path in saved.items()}
    return ReductionResult(
        output=None,
        report=None,
        files=dict(best.files),
        main=found.inp.main,
        signature=first.signature,
        final_signature=verified.signature,
        tokens_before=searched.original_size,
        tokens_after=best.size,
        candidates_tested=searched.outcome.tests,
        placement=searched.placement,
        search_seconds=searched.seconds,
        unused_runs=searched.outcome.unused,
        oracle=found.oracle.stats,
        seconds=ctx.limits.elapsed(),
        stopped=verified.stopped,
        verified=verified.counts,
        isolation=pool.runner.isolation,
        preload_modules=len(pool.preload.modules),
        timeout=pool.calibration.timeout,
        calibration=tuple(round(w, 4) for w in pool.calibration.walls),
        jobs=pool.plan.jobs,
        threads=pool.plan.threads,
        gpus=pool.plan.gpus,
        environment=first.environment,
        notes=ctx.talk.notes,
        launch_env={
            **(dict([launch]) if launch is not None else {}),
            **({"PYTHONHASHSEED": str(config.hash_seed)} if config.hash_seed is not None else {}),
        },
        surfaced=first_run.surfaced,
        original_rate=(pool.rate.reproduced, pool.rate.runs),
        needs=tuple(sorted(set(found.verified.reads or ()) - set(best.files))),
        extracted=found.extracted.extraction,
        extract_error=found.extracted.error,
        trace=searched.trace,
        data_files={name: path for name, path in data_files.items()
                    if any(name in text for text in best.files.values())},
        loaded_objects=tuple((o.file, ", ".join(o.targets) or o.name, o.cls, o.size)
                             for o in searched.facts.saved_objects
                             if any(o.file in text for text in best.files.values())),
        case={
            "keep_error": config.keep_error,
            "family": config.family.key if config.family else None,
            "strictness": config.strictness.value,
            "script": str(spec.script),
            "args": list(spec.args),
            "cwd": str(spec.cwd),
            "root": str(spec.root_dir),
            "module": spec.module,
            "argv0": spec.argv0,
            "original_output": first.stdout[-16384:],
            "timeout_fresh": ctx.limits.fresh_timeout,
            "nproc_per_node": config.launch.nproc if config.launch.ranks else None,
            "seconds": round(first.wall, 3),
        },
        loops=tuple(first.loops),
        varying=tuple(sorted(found.target.free)),
        state=state_fact(ctx, found.start.state, best, data_files),
        passes=found.passes,
        ablation=found.ablated,
        launch=found.launch,
        distributed=distributed_fact(ctx, found),
        start=start_fact(found),
        isolation_because=pool.fresh_because,
        preload_dropped=tuple(pool.preload.dropped),
        torch_preloaded=pool.runner.isolation is Isolation.FORK and "torch" in pool.preload.modules,
        eager=pool.eager,
        alone=alone_fact(ctx, found),
        written_back=found.alone.text if found.alone is not None else None,
    )


def alone_fact(ctx: Context, found: Found) -> dict | None:
    """Which artifact runs alone, as the report's typed fact (its file by the name it is
    written as)."""
    alone = found.alone
    if alone is None:
        return None
    layout = ctx.layout
    names = {"result": layout.output.name, "extracted call": layout.extracted.name,
             "result written back": layout.alone.name}
    return alone.to_json(names)


def start_fact(found: Found) -> dict:
    """What the search started from, as the report's typed fact."""
    start = found.start
    kind = "saved state" if start.state is not None else "cut" if start.program is not None else "original"
    if found.searched.resumed:
        kind = "partial result"
    return {"from": kind, "what": start.what, "seconds": round(start.wall, 3)}


def distributed_fact(ctx: Context, found: Found) -> dict | None:
    """What the report says of a distributed script's ranks: the user's world, the rank
    that failed first, the backend and the collective, how the result runs.  A script
    that starts its own ranks (``mp.spawn``, ``start_processes``, ``multiprocessing.Process``)
    says how it started them; its result runs as ``python``, as the script did, with the
    ranks its own code starts."""
    user = ctx.config.launch
    first = found.user_first
    own = not user.ranks and first.launcher is not None
    if not (user.ranks or own):
        return None
    backend = (first.environment.get("distributed") or {}).get("backend") or (
        found.first.observation.environment.get("distributed") or {}).get("backend")
    op = first.signature.op.name if first.signature is not None and first.signature.op is not None else None
    fact = {
        "world_size": first.world_size if own else user.nproc,
        "rank": first.rank,
        "backend": backend,
        "collective": op if op and op.startswith("torch.distributed.") else None,
        "reduced_world_size": None if own else ctx.spec.launch.nproc,
        "result": "python" if own or not found.launch.ranks else f"torchrun --nproc-per-node={found.launch.nproc}",
        "launch_notes": [] if own else list(user.notes),
    }
    if own:
        fact["started_by"] = first.launcher
    return fact


def state_fact(ctx: Context, record: StateRecord | None, best: Candidate, data_files: dict[str, str]) -> dict | None:
    """What the report says of the state file, when the result loads it."""
    if record is None or not any(record.state_file in text for text in best.files.values()):
        return None
    path = data_files.get(record.state_file)
    path = Path(path) if path is not None else None
    return {
        "file": record.state_file, "loop": record.header, "in": record.file, "iteration": record.iteration,
        "restores": [expr for expr, _kind in record.entries], "rng": list(record.rng),
        "bytes": path.stat().st_size if path is not None and path.is_file() else 0,
        # the files the run wrote before that iteration, when the result puts them back
        "files_dir": record.files_dir if record.files_dir and any(
            record.files_dir in text for text in best.files.values()) else None,
    }
