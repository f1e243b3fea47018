"""Everything ``--resume`` reads and writes, in one place: the original's first run kept
beside the output, the extracted call and the saved state an earlier run left, and the
partial result the search starts from.

A user's job may take an hour to reach its first error; an interrupted reduction must not
pay that hour again.  What the first run observed (its first error, the loops around it,
the shapes the operator saw, the arguments of the call that raised, the objects and the
library call it saved) is written, once it is known to be the bug to keep, to
``<base>.first/``: ``first.pkl`` and the files the run saved.  A later ``--resume`` of the
same reduction reads it back instead of running the original, when the program, its
arguments and what the first run was asked to record are unchanged; otherwise it says why
and runs the original.

A pickle, not JSON: the observation is a tree of the reducer's own frozen dataclasses
(signatures, operator records, the spec), written and read by the same installed version
(the version is part of the key), and the file is the user's own, beside their output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

from shrinkgpu import __version__
from shrinkgpu.extract import check_extracted
from shrinkgpu.layout import Scratch
from shrinkgpu.reducer.first_run import with_sync_launches
from shrinkgpu.reducer.setup import spec_for
from shrinkgpu.report import read_partial
from shrinkgpu.syntax.facts import loop_facts
from shrinkgpu.worker import Observation, Watch

# What the first run saved into the session directory, by name (reducer/original.py).
ARTIFACTS = Scratch.FIRST_RUN
PAYLOAD = "first.pkl"
# A first run shorter than this is cheaper to repeat than to keep.
KEEP_MIN_SECONDS = 10.0
# The variables that change how a script runs; the rest of the environment (a terminal's
# own) changes between sessions and must not make a kept run stale.
_ENV_PREFIXES = ("CUDA", "HIP", "ROCR", "TORCH", "PYTORCH", "PYTHONHASHSEED", "OMP_", "MKL_", "NCCL", "TRITON")


def key_of(config, spec, main_text: str, modules: tuple[tuple[str, str | None, str | None], ...]) -> str:
    """What must be unchanged for a kept first run to stand for a new one."""
    root = Path(spec.root_dir)
    texts = {}
    for _name, _file, rel in modules:
        if rel is not None:
            try:
                texts[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
            except OSError:
                texts[rel] = "missing"
    env = spec.env if spec.env is not None else {}
    parts = {
        "version": __version__,
        "main": hashlib.sha256(main_text.encode("utf-8")).hexdigest(),
        "modules": texts,
        "args": list(spec.args),
        "script": str(spec.script),
        "cwd": str(spec.cwd),
        "env": {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)},
        "keep_error": config.keep_error,
        "family": str(config.family),
        "record": [config.cut_library, config.save_objects, config.extract, config.write],
        "launch": str(config.sync_launches),
        "ranks": [spec.launch.nproc, spec.launch.ranks],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def save(where: Path, original: Any, session: Path, key: str) -> None:
    """Write ``original`` (the session's ``Original``) and the files its first run saved
    in ``session`` to the directory ``where``, replacing what was there."""
    tmp = where.with_name(where.name + ".writing")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ARTIFACTS:
        source = session / name
        if source.is_dir():
            shutil.copytree(source, tmp / name)
        elif source.is_file():
            shutil.copy2(source, tmp / name)
    # Not the environment (it may hold tokens): a resumed run takes its own (``kept_original``).
    first = original.first
    bare = dataclasses.replace(first, config=dataclasses.replace(first.config, env=None),
                               spec=dataclasses.replace(first.spec, env=None))
    payload = {"key": key, "session": str(session), "original": dataclasses.replace(original, first=bare)}
    (tmp / PAYLOAD).write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
    shutil.rmtree(where, ignore_errors=True)
    tmp.rename(where)


def load(where: Path, session: Path, key_for) -> tuple[Any, str | None]:
    """(the kept ``Original`` with its files copied into ``session``, None), or (None,
    why it cannot be used).  ``key_for(original)``: the key the current program gives,
    computed from the modules the kept run imported."""
    path = where / PAYLOAD
    if not path.is_file():
        return None, None
    try:
        payload = pickle.loads(path.read_bytes())
        original = payload["original"]
        old_session = payload["session"]
        kept_key = payload["key"]
    except Exception as exc:  # another version's classes, a truncated file
        return None, f"the kept first run in {where.name}/ could not be read ({type(exc).__name__})"
    if key_for(original) != kept_key:
        return None, (f"the kept first run in {where.name}/ is from another program, arguments or options "
                      "(or another shrinkgpu): running the original again")
    for name in ARTIFACTS:
        source = where / name
        if source.is_dir():
            shutil.copytree(source, session / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, session / name)
    return relocated(original, old_session, str(session)), None


def relocated(original: Any, old: str, new: str) -> Any:
    """``original`` with every path into the old session directory moved to the new one."""

    def move(value: Any) -> Any:
        if isinstance(value, str):
            return new + value[len(old):] if value.startswith(old) else value
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(move(v) for v in value)
        return value

    def observation(obs: Observation) -> Observation:
        return dataclasses.replace(obs, cut=move(obs.cut), saved_objects=move(obs.saved_objects),
                                   raised_calls=move(obs.raised_calls))

    first = dataclasses.replace(original.first, observation=observation(original.first.observation))
    attempts = tuple(first.observation if a is original.first.observation else observation(a)
                     for a in original.attempts)
    return dataclasses.replace(original, first=first, attempts=attempts)


# -- what a reduction reads back, and writes for a later one ------------------------------------
def kept_original(ctx, first_key) -> Any:
    """--resume: the first run an earlier run of this reduction kept (an ``Original``),
    when the program and the options are the same; it is not run again.  ``first_key``:
    the key an ``Original`` gives with this run's program and options."""
    where = ctx.layout.first_run
    kept, why = load(where, ctx.sandbox.session, first_key)
    if why is not None:
        ctx.talk.note(f"--resume: {why}")
    if kept is None:
        return None
    first = kept.first
    # The options of this run, with what the kept one settled (synchronous launches).
    config = with_sync_launches(ctx.config, first.observation.environment)[0] if first.launch else ctx.config
    # and the environment of this run: the kept spec has the one the earlier run had
    kept = dataclasses.replace(kept, first=dataclasses.replace(first, config=config, spec=spec_for(config)))
    ctx.talk.stage(f"--resume: the original's first run ({first.observation.wall:.0f}s, "
                   f"{first.observation.describe()}) is kept in {where.name}/: not run again")
    return kept


def keep_original(ctx, original, key: str) -> None:
    """A long first run, kept beside the output once it is the bug to keep, so that an
    interrupted reduction resumed with --resume does not repeat it."""
    obs = original.first.observation
    # (a run --max-time stopped holds none of the facts a resumed reduction needs)
    if not ctx.config.write or obs.wall < KEEP_MIN_SECONDS or obs.timed_out:
        return
    try:
        save(ctx.layout.first_run, original, ctx.sandbox.session, key)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
        ctx.talk.note(f"the first run could not be kept for --resume ({type(exc).__name__}: {exc})", show=False)
        return
    ctx.talk.stage(f"the original's first run is kept in {ctx.layout.first_run.name}/: --resume will not run it again")


def case_seconds(ctx) -> float | None:
    """How long the original's first run took, as the case file an earlier reduction to
    this output wrote says (None: no such file, or it does not say)."""
    try:
        seconds = json.loads(ctx.layout.case.read_text(encoding="utf-8"))["original"]["seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(seconds) if isinstance(seconds, (int, float)) else None


def kept_extraction(ctx, target, needs: float, limit: float):
    """--resume: the extracted call an earlier run of this reduction wrote, when it
    still fails the same way in a fresh interpreter (an ``Extraction``), else None;
    ``needs``, ``limit``: what its check takes, and may take."""
    path = ctx.layout.extracted
    if not path.is_file():
        return None
    slot = ctx.limits.slot("the check of the extracted call an earlier run wrote", needs, limit)
    if slot.refused:
        ctx.talk.note(f"--resume: {slot.refused}")
        return None
    extraction = check_extracted(path, target, slot.timeout, ctx.spec.env, ctx.executors)
    if extraction is None:
        ctx.talk.note(f"--resume: the extracted call at {path.name} no longer fails the same way; extracting again")
        return None
    ctx.talk.stage(f"--resume: the extracted call at {path} still fails the same way: kept")
    return extraction


def point_key(point) -> list:
    """What identifies where a state was saved (a ``StatePoint``), in its record."""
    return [point.file, point.header_text, point.iteration, point.call]


def kept_state(ctx, point) -> tuple[dict, Path] | None:
    """--resume: the state an earlier run of this reduction saved at the same point, so
    that the run that saves it is not repeated (the replay is checked again): what the
    probe said it saved, and a copy of the file in this session."""
    data, sidecar, files = ctx.layout.state
    try:
        kept = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not data.is_file() or kept.get("point") != point_key(point):
        return None
    ctx.talk.stage(f"--resume: the state saved at iteration {point.iteration} of `{point.header_text}` "
                   f"is at {data.name}: not saved again")
    # A copy of its own: the file beside the output is rewritten with the result.
    copy = ctx.scratch.state
    shutil.copy2(data, copy)
    if files.is_dir():
        shutil.copytree(files, ctx.scratch.state_written, dirs_exist_ok=True)
    return kept.get("saved") or {}, copy


def keep_state(ctx, point, saved: dict, path: Path, files_src: Path | None) -> None:
    """The checked state beside the output now, with its record: the partial result the
    search keeps on disk loads it, and --resume starts from that."""
    beside, sidecar, beside_files = ctx.layout.state
    beside.parent.mkdir(parents=True, exist_ok=True)
    if path.resolve() != beside.resolve():
        shutil.copy2(path, beside)
    if files_src is not None and files_src.resolve() != beside_files.resolve():
        shutil.rmtree(beside_files, ignore_errors=True)
        shutil.copytree(files_src, beside_files)
    sidecar.write_text(json.dumps({"point": point_key(point), "saved": saved}, indent=2, default=str),
                       encoding="utf-8")


def partial_start(ctx, oracle, target, facts, main: str):
    """The partial result at the output as the search's start (a ``Candidate``), when it
    still reproduces; else a sentence saying why not."""
    output = ctx.layout.output
    files = read_partial(ctx.layout, main)
    if files is None:
        return f"--resume: no partial result at {output}; starting from the original"
    slot = ctx.limits.slot(f"the check of the partial result at {output.name}", ctx.limits.candidate_wall,
                           ctx.limits.calibrated)
    if slot.refused:
        return f"--resume: {slot.refused}; starting from the original"
    obs = oracle.observe(files, timeout=slot.timeout, watch=Watch(count_loops=True))
    if not target.matches(obs.signature):
        return (f"--resume: the partial result at {output.name} no longer reproduces ({obs.describe()}); "
                "starting from the original")
    facts = dataclasses.replace(facts, loops=loop_facts(files, obs.loops) or facts.loops)
    return facts.program(files, main, obs).initial()
