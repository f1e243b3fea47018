"""The program's state at the start of the failing iteration, saved once
(``Watch.state``) so that a candidate can start there instead of re-running every
earlier iteration (passes/replay.py).

What a training step needs and the frame holds: the weights, the optimizer's moments,
the scheduler's step, the scaler's scale (``state_dict`` of each), the values the loop
rebinds (its targets: the batch; counters; a running tensor), the random generators.
What it cannot carry (an iterator half-way through a loader, a file, a thread) is
rebuilt by the program's own code before the loop, as the replay runs it; the replay is
checked in a fresh interpreter before any candidate relies on it, so what this module
leaves out is found there, never guessed here.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from shrinkgpu.worker.probe.loops import LoopCounter
from shrinkgpu.worker.probe.paths import of_users_class
from shrinkgpu.worker.protocol import StateAt

# What one state file may hold.  It is the user's weights: a large model's are what
# they are, but a file past this size is no longer worth the replay's time to load.
STATE_MAX_BYTES = 8 * 2**30
# A plain value (a list of losses, a dict of metrics) past this many items is a record
# the loop keeps, not what the failing step reads.
PLAIN_MAX_ITEMS = 100_000


class StateSaver(LoopCounter):
    """The loop counter of ``probe.loops`` that saves the state once, as the wanted
    iteration's body starts in the wanted frame.
    ``out`` receives what was saved (``save_state``)."""

    def __init__(self, roots: tuple[str, ...], rel, at: StateAt, out: dict[str, Any],
                 stamps: dict[str, tuple[int, int]] | None = None):
        super().__init__(roots)
        self.rel, self.at, self.out = rel, at, out
        # the working directory's files as the run started (``file_stamps``)
        self.stamps = stamps
        self.done = False
        self._ours: dict[Any, bool] = {}
        self._told = 0.0

    def ticked(self, frame, header: int, state: list[Any]) -> None:
        if self.done or header != self.at.header:
            return
        code = frame.f_code
        ours = self._ours.get(code)
        if ours is None:
            ours = self._ours[code] = self.rel(code.co_filename) == self.at.file
        # only the call the failure came in: the same function's earlier calls (a
        # validation during training) save nothing
        if not ours or (self.at.call and state[2] != self.at.call):
            return
        counts = state[1]
        if self.at.progress:
            self._tell(counts)
        if all(counts.get(h) == it for h, it in self.at.iterations):
            self.done = True
            try:
                self.out.update(save_state(frame, self.at, self.roots))
                if self.stamps is not None:
                    self.out.update(save_written_files(self.stamps, self.at.path + ".files"))
            except Exception as exc:  # an offer: the run goes on as the script wrote it
                self.out.update(error=f"{type(exc).__name__}: {exc}", path=None)

    def _tell(self, counts: dict[int, int]) -> None:
        """The iterations the loops are in (those of ``at.iterations``, outermost first),
        for the parent's progress lines, every few seconds."""
        import os
        import time

        now = time.monotonic()
        if now - self._told < PROGRESS_SECONDS:
            return
        self._told = now
        try:
            tmp = f"{self.at.progress}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(",".join(str(counts.get(h, 0)) for h, _ in self.at.iterations))
            os.replace(tmp, self.at.progress)
        except OSError:
            pass


# How often the loop's iteration is written for the progress lines.
PROGRESS_SECONDS = 5.0


# The files the run wrote before the failing iteration (a checkpoint the training saved,
# which the statement before the evaluation loads) are copied beside the state up to
# this much; beyond it the replay goes without them (and its check says what is missing).
FILES_MAX_BYTES = 2 * 2**30
FILES_MAX_COUNT = 2000
# A working directory past this many files is not walked (a dataset unpacked in place).
STAMPS_MAX_FILES = 100_000
_NOT_STATE = ("__pycache__", ".git")


def file_stamps(top: str = ".") -> dict[str, tuple[int, int]] | None:
    """(mtime_ns, size) of every file under ``top`` (relative paths; symlinked
    directories not followed: shared data is not the run's output), or None when there
    are too many to walk at every save."""
    import os

    stamps: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in _NOT_STATE]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            stamps[os.path.relpath(path, top)] = (st.st_mtime_ns, st.st_size)
            if len(stamps) > STAMPS_MAX_FILES:
                return None
    return stamps


def save_written_files(before: dict[str, tuple[int, int]], dest: str, top: str = ".") -> dict[str, Any]:
    """Copy the files under ``top`` that are new or changed since ``before`` to ``dest``
    (same relative paths): what the earlier iterations wrote that the program after them
    may read (``files``); ``files_error``: why none were copied."""
    import os
    import shutil

    now = file_stamps(top)
    if now is None:
        return {"files": [], "files_error": f"the working directory holds more than {STAMPS_MAX_FILES} files"}
    written = sorted(rel for rel, stamp in now.items() if before.get(rel) != stamp and not rel.endswith(".pyc"))
    if not written:
        return {"files": []}
    size = sum(now[rel][1] for rel in written)
    if len(written) > FILES_MAX_COUNT or size > FILES_MAX_BYTES:
        return {"files": [], "files_error": f"the run wrote {len(written)} files ({size / 2**20:.0f} MiB) before "
                                            "that iteration: too many to copy"}
    copied = []
    for rel in written:
        target = os.path.join(dest, rel)
        try:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copy2(os.path.join(top, rel), target)
        except OSError:
            continue  # a file that went away meanwhile (a temporary one)
        copied.append(rel)
    return {"files": copied, "files_bytes": sum(now[rel][1] for rel in copied)}


def _stateful(value) -> bool:
    """A module, optimizer, LR scheduler, grad scaler or anything else that keeps its state
    as ``state_dict()`` and takes it back with ``load_state_dict``."""
    if isinstance(value, type):
        return False
    return callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None))


def _generator_kind(value) -> str | None:
    """How a random generator object's state is read and restored, if it is one."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Generator):
        return "torch-generator"
    import random

    if isinstance(value, random.Random):
        return "random-generator"
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.random.Generator):
        return "numpy-generator"
    return None


def _plain(value, depth: int = 0) -> bool:
    """A value that is data and can be saved and assigned back: numbers, strings,
    tensors, arrays, and lists, tuples, sets and dicts of them."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        return value.dtype != object if isinstance(value, np.ndarray) else True
    if depth >= 3:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return len(value) <= PLAIN_MAX_ITEMS and all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= PLAIN_MAX_ITEMS and all(
            isinstance(k, (str, int)) and _plain(v, depth + 1) for k, v in value.items()
        )
    return False


def _bytes(value, depth: int = 0) -> int:
    """About what saving ``value`` costs: its tensors' and arrays' bytes, 16 per other leaf."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if hasattr(value, "nbytes") and isinstance(value.nbytes, int):
        return value.nbytes
    if depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        return sum(_bytes(v, depth + 1) for v in value) + 16
    if depth < 4 and isinstance(value, dict):
        return sum(_bytes(v, depth + 1) for v in value.values()) + 16
    return 16


def _detached(value, depth: int = 0):
    """``value`` with every tensor that is part of an autograd graph cut from it (a graph
    cannot be saved; the step builds its own)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach() if value.grad_fn is not None else value
    if depth < 3 and isinstance(value, (list, tuple)):
        return type(value)(_detached(v, depth + 1) for v in value) if type(value) in (list, tuple) else value
    if depth < 3 and isinstance(value, dict) and type(value) is dict:
        return {k: _detached(v, depth + 1) for k, v in value.items()}
    return value


def save_state(frame, at: StateAt, roots: tuple[str, ...]) -> dict[str, Any]:
    """Save what the failing iteration needs from ``frame`` to ``at.path`` (one
    ``torch.save``); the record of it: ``entries`` (expr, kind, bytes), ``left`` (expr,
    why not), the RNGs saved, the total."""
    import torch

    scope = frame.f_locals
    wanted = set(at.names)
    saved: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    left: list[dict[str, str]] = []
    seen: set[int] = set()
    total = 0

    def add(expr: str, kind: str, value) -> None:
        nonlocal total
        size = _bytes(value)
        if total + size > STATE_MAX_BYTES:
            left.append({"expr": expr, "why": f"the state would pass {STATE_MAX_BYTES // 2**30} GiB"})
            return
        total += size
        saved[expr] = value
        entries.append({"expr": expr, "kind": kind, "bytes": size, "class": type_name})

    def consider(expr: str, value, plain_too: bool) -> None:
        nonlocal type_name
        if id(value) in seen and not isinstance(value, (int, float, bool, str, type(None))):
            return
        type_name = f"{type(value).__module__}.{type(value).__qualname__}"
        generator = _generator_kind(value)
        if generator is not None:
            seen.add(id(value))
            state = (value.get_state() if generator == "torch-generator" else
                     value.getstate() if generator == "random-generator" else value.bit_generator.state)
            add(expr, generator, state)
            return
        if _stateful(value):
            seen.add(id(value))
            try:
                add(expr, "load", value.state_dict())
            except Exception as exc:
                left.append({"expr": expr, "why": f"state_dict() raised {type(exc).__name__}: {exc}"})
            if of_users_class(value, roots):
                # A state_dict holds tensors; what the user's own class keeps besides
                # (``self.batch_size`` that a callback ramps, a step counter) is state too.
                for attr, inner in list(vars(value).items())[:256]:
                    if (not attr.startswith("_") and attr != "training" and attr.isidentifier()
                            and (inner is None or isinstance(inner, (bool, int, float, str)))):
                        type_name = f"{type(inner).__module__}.{type(inner).__qualname__}"
                        add(f"{expr}.{attr}", "value", inner)
            return
        if isinstance(value, torch.nn.Parameter) or (
            isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is None
        ):
            # A leaf an optimizer updates (``log_alpha``), whichever names the loop shows:
            # restored in place, so that the optimizer still holds the tensor it updates.
            seen.add(id(value))
            add(expr, "copy", value.detach().clone())
            return
        if not plain_too:
            return
        if _plain(value):
            seen.add(id(value))
            add(expr, "value", _detached(value))
            return
        left.append({"expr": expr, "why": f"a {type(value).__qualname__} (not data a file can carry)"})

    type_name = ""
    named = [(name, value, True) for name, value in list(scope.items())]
    if frame.f_code.co_name != "<module>":
        # A function's loop trains the module-level ``model`` with the module-level
        # ``opt``: the globals its code names are state too (loaded, never rebound).
        used = set(frame.f_code.co_names)
        named += [(name, value, False) for name, value in list(frame.f_globals.items())
                  if name in used and name not in scope]
    for name, value, local in named:
        if name.startswith("__") or isinstance(value, (types.ModuleType, types.FunctionType, type,
                                                       types.BuiltinFunctionType, types.MethodType)):
            continue
        consider(name, value, local and name in wanted)
        if of_users_class(value, roots) and not _stateful(value):
            for attr, inner in list(vars(value).items())[:256]:
                expr = f"{name}.{attr}"
                if attr.startswith("__") or not attr.isidentifier():
                    continue
                consider(expr, inner, local and (name in wanted or expr in wanted or f"{name}.*" in wanted))

    # An optimizer's state_dict holds its moments, not the weights it updates: the
    # modules that own them are state too, wherever the frame's module binds them (a
    # ``train()`` that names only ``opt`` trains the module-level ``model``).
    updated = {id(p) for value in list(scope.values()) + list(frame.f_globals.values())
               if isinstance(value, torch.optim.Optimizer) and id(value) in seen
               for group in value.param_groups for p in group["params"]}
    if updated:
        for name, value in list(frame.f_globals.items()):
            if (isinstance(value, torch.nn.Module) and id(value) not in seen and not name.startswith("__")
                    and any(id(p) in updated for p in value.parameters())):
                consider(name, value, False)

    return _write_state(frame, at, saved, entries, left)


def _write_state(frame, at: StateAt, saved: dict[str, Any], entries: list, left: list) -> dict[str, Any]:
    """``saved`` and the RNGs in one ``torch.save`` to ``at.path``; the record of it."""
    import os
    import random

    import torch

    rng: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    np = sys.modules.get("numpy")
    if np is not None:
        rng["numpy"] = np.random.get_state()
    # One flat dict: what the replay reads is ``state["model"]``, ``state["rng:torch"]``.
    torch.save({**saved, **{f"rng:{k}": v for k, v in rng.items()}}, at.path)
    iteration = dict(at.iterations).get(at.header, 0)
    return {
        "path": at.path,
        "file": at.file,
        "header": at.header,
        "iteration": iteration,
        "function": frame.f_code.co_name,
        "entries": entries,
        "left": left,
        "rng": sorted(rng),
        "bytes": os.path.getsize(at.path),
    }


__all__ = ["STATE_MAX_BYTES", "StateSaver", "file_stamps", "save_state", "save_written_files"]
