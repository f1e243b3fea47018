"""The original's first run kept beside the output, so that ``--resume`` does not repeat it.

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
from shrinkgpu.worker import Observation

# What the first run saved into the session directory, by name (session.observe_original).
ARTIFACTS = ("call.pt", "objects", "raised")
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
    # Not the environment (it may hold tokens): a resumed run takes its own (session.kept_first).
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
