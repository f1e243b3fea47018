"""The user's data objects alive at the first error, pickled for passes/data.py.

Two kinds: instances of the user's own classes that hold data (a dataset, a vocabulary),
and what the user's own data helpers returned (``train, val, test = build_splits(cfg)``:
lists, dicts and tensors of plain data).  The second kind is for a program started at its
failing step from a saved state (passes/replay.py): its candidates still run the whole
data pipeline before the restore, and the result loads the user's data already.
"""

from __future__ import annotations

import ast
import itertools
import os
import sys
import types
from typing import Any

from shrinkgpu.worker.probe.paths import is_user_file
from shrinkgpu.worker.probe.sizes import frame_statements

# What one first run may save of the user's data objects: a dataset that synthesises a
# few thousand samples is a few MB; one that holds a corpus is no file to put beside a
# result, and the extracted call already carries the failing call's own tensors.
SAVED_OBJECT_MAX_BYTES = 64 * 2**20


SAVED_OBJECTS_MAX = 8

# Of those, the helpers' results: the outermost frames' (``main``'s) come first, and they
# are the pipeline's products.
SAVED_RESULTS_MAX = 4

_SCALARS = (int, float, bool, str, bytes, type(None))
_CONTAINERS = (list, tuple, dict, set, frozenset)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


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


def _plain(value, depth: int = 0) -> bool:
    """Data and nothing else: scalars, strings, tensors and arrays that no autograd graph
    or module owns, and the builtin containers of those (the first 64 items of each
    looked at, three levels deep).  A model, an optimizer, a generator or a file is not."""
    if isinstance(value, _SCALARS):
        return True
    if _array(value):
        return True
    if isinstance(value, _CONTAINERS) and depth < 3:
        items = list(itertools.islice(value.items() if isinstance(value, dict) else value, 64))
        flat = [x for pair in items for x in pair] if isinstance(value, dict) else items
        return all(_plain(v, depth + 1) for v in flat)
    return False


def _array(value) -> bool:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return not isinstance(value, torch.nn.Parameter) and not value.requires_grad and value.grad_fn is None
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray) and value.dtype != object


def _bulk(value) -> bool:
    """Enough data to be worth a file: a tensor or an array, or 16 items and more."""
    return _array(value) or (isinstance(value, _CONTAINERS) and len(value) >= 16)


def _helper_results(frame, roots: tuple[str, ...]) -> list[tuple[list[str], str, Any]]:
    """``(targets, helper, value)`` for each ``targets = helper(...)`` of the frame's own
    statements where ``helper`` is a function of the user's and each target holds plain
    data at the error (a tuple of the targets' values for ``a, b = helper(...)``)."""
    scope = frame_statements(frame)
    if scope is None:
        return []
    local = frame.f_locals
    out = []
    stack = list(reversed(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, ast.stmt):
            stack.extend(reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]))
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)):
            continue
        helper = local.get(node.value.func.id, frame.f_globals.get(node.value.func.id))
        if not isinstance(helper, types.FunctionType) or not is_user_file(helper.__code__.co_filename, roots):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            names = [target.id]
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
            names = [e.id for e in target.elts]  # type: ignore[attr-defined]
        else:
            continue
        if not all(n in local for n in names):
            continue
        values = [local[n] for n in names]
        if all(_plain(v) for v in values) and any(_bulk(v) for v in values):
            out.append((names, node.value.func.id, values[0] if len(names) == 1 else tuple(values)))
    return out


def _pickle_to(path: str, value) -> int | None:
    """Pickle ``value`` to ``path``: the bytes written, or None (too large, or not picklable:
    a lock, a lambda), the file then gone."""
    import pickle

    try:
        with open(path, "wb") as fh:
            capped = _CappedFile(fh, SAVED_OBJECT_MAX_BYTES)
            pickle.Pickler(capped, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        return capped.written
    except Exception:
        try:
            os.unlink(path)
        except OSError:
            pass
        return None


def saved_objects(
    exc: BaseException, roots: tuple[str, ...], directory: str, results: bool = False
) -> list[dict[str, Any]]:
    """The user's data objects alive at the first error, each pickled to ``directory``:
    (name, class, file, bytes) for every name a user frame on the error's stack binds
    (outermost first, then each frame's module globals) to an instance the user's own
    class built.  A candidate can then load the object instead of building it
    (passes/data.py): the constructor's draws of random data are what pins the shapes
    at the failing call, and every edit that changes how many numbers it draws is
    otherwise rejected.

    With ``results``, then the helpers' results each frame bound (``"targets"``: the names
    the statement binds, ``"class"``: ``helper()``), innermost frames last."""
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
            size = _pickle_to(path, value)
            if size is not None:
                out.append({"name": name, "class": type(value).__qualname__, "path": path, "bytes": size})
    if not results:
        return out
    taken: set[tuple] = set()
    for frame in frames:
        for names, helper, value in _helper_results(frame, roots):
            key = (frame.f_code, tuple(names))
            if key in taken:
                continue  # a recursion's second frame
            if len(out) >= SAVED_OBJECTS_MAX or len(taken) >= SAVED_RESULTS_MAX:
                return out
            path = os.path.join(directory, f"{len(out)}.pkl")
            size = _pickle_to(path, value)
            if size is not None:
                taken.add(key)
                out.append({"name": names[0], "targets": names, "class": f"{helper}()", "path": path, "bytes": size})
    return out
