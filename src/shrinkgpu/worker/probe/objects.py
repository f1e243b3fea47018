"""The user's data objects alive at the first error, pickled for passes/data.py."""

from __future__ import annotations

import os
import sys
from typing import Any

from shrinkgpu.worker.probe.paths import is_user_file


# What one first run may save of the user's data objects: a dataset that synthesises a
# few thousand samples is a few MB; one that holds a corpus is no file to put beside a
# result, and the extracted call already carries the failing call's own tensors.
SAVED_OBJECT_MAX_BYTES = 64 * 2**20


SAVED_OBJECTS_MAX = 8


class _TooLarge(Exception):
    pass


class _CappedFile:
    """A file for ``pickle`` that gives up once it has written ``cap`` bytes, so a large
    object costs its first ``cap`` bytes, not its whole size, before it is refused."""

    def __init__(self, fh, cap: int):
        self.fh, self.cap, self.written = fh, cap, 0

    def write(self, data) -> int:
        # Protocol 5 hands a large array's memory over as a ``PickleBuffer``, which has
        # no ``len``: its size is its memoryview's.
        self.written += memoryview(data).nbytes
        if self.written > self.cap:
            raise _TooLarge
        return self.fh.write(data)


def _holds_data(value) -> bool:
    """Whether an attribute holds data worth a file: an array or tensor, or a collection
    of at least 16 items (a config's scalars and short lists are better as literals)."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return True
    return isinstance(value, (list, tuple, dict)) and len(value) >= 16


def _data_object(value, roots: tuple[str, ...]) -> bool:
    """An instance of a class the user wrote (importable by name) that holds data and no
    model or optimizer: a dataset, a generated table, a sample bank."""
    cls = type(value)
    if "<locals>" in cls.__qualname__:
        return False  # pickle could not find the class again
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path or not is_user_file(path, roots):
        return False
    try:
        attributes = vars(value)
    except TypeError:
        return False
    torch = sys.modules.get("torch")
    if torch is not None:
        held = (torch.nn.Module, torch.optim.Optimizer)
        if isinstance(value, held) or any(isinstance(v, held) for v in attributes.values()):
            return False  # a model's construction is the configuration a maintainer reads
    return any(_holds_data(v) for v in list(attributes.values())[:256])


def saved_objects(exc: BaseException, roots: tuple[str, ...], directory: str) -> list[dict[str, Any]]:
    """The user's data objects alive at the first error, each pickled to ``directory``:
    (name, class, file, bytes) for every name a user frame on the error's stack binds
    (outermost first, then each frame's module globals) to an instance the user's own
    class built.  A candidate can then load the object instead of building it
    (passes/data.py): the constructor's draws of random data are what pins the shapes
    at the failing call, and every edit that changes how many numbers it draws is
    otherwise rejected."""
    import pickle

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename, roots):
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    scopes = [f.f_locals for f in frames] + [f.f_globals for f in frames]
    seen: set[int] = set()
    out: list[dict[str, Any]] = []
    os.makedirs(directory, exist_ok=True)
    for scope in scopes:
        for name, value in list(scope.items()):
            if len(out) >= SAVED_OBJECTS_MAX:
                return out
            if name.startswith("__") or name == "self" or id(value) in seen:
                continue
            seen.add(id(value))
            if not _data_object(value, roots):
                continue
            path = os.path.join(directory, f"{len(out)}.pkl")
            try:
                with open(path, "wb") as fh:
                    capped = _CappedFile(fh, SAVED_OBJECT_MAX_BYTES)
                    pickle.Pickler(capped, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
            except Exception:  # too large, or not picklable (a lock, a lambda): not offered
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            out.append({"name": name, "class": type(value).__qualname__, "path": path, "bytes": capped.written})
    return out
