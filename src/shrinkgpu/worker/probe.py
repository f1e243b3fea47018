"""What runs inside a candidate process: the user's script, watched.

The probe makes the process look to the script exactly like ``python SCRIPT ARGS`` run
from the user's directory (argv, cwd, ``sys.path[0]``, ``__main__``), runs it under a
``TorchFunctionMode`` that notes every torch call that raises, and writes what it saw
as JSON for the reducer.  It is used two ways:

* forked from the supervisor, which already imported torch and the script's libraries
  (``run_in_child``);
* as ``python -c "...probe.main()" REQUEST.json`` in a fresh interpreter.

It must import nothing heavy at module level: in the fresh case torch is imported by
the script's own first ``import torch`` timing-wise, here just before it.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MAX_TORCH_ERRORS = 16
MAX_FLAT_ARGS = 64
REPR_LIMIT = 80

# Exit statuses the probe itself uses when the user's script could not even start.
EXIT_PROBE_FAILURE = 70


def _is_under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _is_user_file(filename: str, roots: tuple[str, ...]) -> bool:
    # "<string>", "<frozen ...>": code without a file, never the user's
    return not filename.startswith("<") and _is_under(os.path.abspath(filename), roots)


def _loop_spans(filename: str, roots, *, whiles: bool) -> list[tuple[int, int, int]]:
    """(header line, first body line, last line) of each ``for`` loop (and ``while``,
    with ``whiles``) of one of the user's files; none for a library's or an unreadable
    file."""
    if not _is_user_file(filename, roots):
        return []
    import ast

    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    kinds = (ast.For, ast.While) if whiles else (ast.For,)
    return [
        (node.lineno, node.body[0].lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree) if isinstance(node, kinds) and node.body
    ]


class _LoopCounter:
    """Which iteration each ``for`` loop of the user's code is in, per frame.

    A line tracer, on for the original's first run only (``count_loops``): it costs a
    Python call per line of user code.  A loop's header line gets a line event when the
    loop is entered and again at each jump back from its body, so the iteration is the
    number of jumps back since the last entry (a header spread over several lines gets
    events for its other lines too; those are neither)."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.loops: dict[str, dict[int, tuple[int, int]]] = {}  # file -> header line -> (body start, end)
        self.state: dict[int, list[Any]] = {}  # id(frame) -> [previous line, {header: iteration}]
        self.raising: set[int] = set()

    def _loops_of(self, filename: str) -> dict[int, tuple[int, int]]:
        found = self.loops.get(filename)
        if found is None:
            found = {head: (start, end) for head, start, end in _loop_spans(filename, self.roots, whiles=False)}
            self.loops[filename] = found
        return found

    def install(self) -> None:
        sys.settrace(self._call)

    def _call(self, frame, event, arg):
        if not self._loops_of(frame.f_code.co_filename):
            return None
        self.state[id(frame)] = [0, {}]  # a new frame (ids of dead ones get reused)
        return self._local

    def _local(self, frame, event, arg):
        key = id(frame)
        if event == "line":
            self.raising.discard(key)
            state = self.state.get(key)
            if state is None:
                return self._local
            line = frame.f_lineno
            loops = self.loops.get(frame.f_code.co_filename, {})
            span = loops.get(line)
            if span is not None:
                prev = state[0]
                body_start, end = span
                if body_start <= prev <= end:
                    state[1][line] = state[1].get(line, 0) + 1  # back from the body
                elif not (line <= prev < body_start):
                    state[1][line] = 0  # entered
            state[0] = line
        elif event == "exception":
            self.raising.add(key)
        elif event == "return":
            if key not in self.raising:
                self.state.pop(key, None)
        return self._local

    def at(self, frames: list[tuple[Any, int]], rel) -> list[list[Any]]:
        """[file, header line, iteration] for the loops around each (frame, line)."""
        out = []
        for frame, line in frames:
            state = self.state.get(id(frame))
            if state is None:
                continue
            filename = frame.f_code.co_filename
            loops = self.loops.get(filename, {})
            for header, iteration in sorted(state[1].items()):
                body_start, end = loops.get(header, (0, -1))
                if body_start <= line <= end:
                    out.append([rel(filename), header, iteration])
        return out


class _LoopClock:
    """Where the run's time goes, by loop: a thread that looks at the main thread's stack
    every few milliseconds and counts, for each ``for``/``while`` of the user's code that
    a frame is inside, one sample.  On with ``count_loops`` only (the original's first
    run), beside the line tracer: the shares are of a traced run, which slows Python-heavy
    loops more than tensor-heavy ones; they rank loops, they are not timings.

    A sampling thread rather than a profiling signal: a signal interrupts the script's own
    system calls, which some C extensions do not retry."""

    INTERVAL = 0.005

    def __init__(self, roots: tuple[str, ...], rel):
        import threading

        self.roots = roots
        self.rel = rel
        self.samples = 0
        self.hits: dict[tuple[str, int], int] = {}
        self.spans: dict[str, list[tuple[int, int, int]]] = {}  # file -> (header, body start, end)
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shrinkgpu-loop-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[list[Any]]:
        """[file, header line, share of the samples] for loops that got any, largest first."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        if not self.samples:
            return []
        ranked = sorted(self.hits.items(), key=lambda kv: -kv[1])
        return [[file, line, round(n / self.samples, 4)] for (file, line), n in ranked[:32]]

    def _spans_of(self, filename: str) -> list[tuple[int, int, int]]:
        found = self.spans.get(filename)
        if found is None:
            found = _loop_spans(filename, self.roots, whiles=True)
            self.spans[filename] = found
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            frame = sys._current_frames().get(self._main)
            self.samples += 1
            seen = set()
            while frame is not None:
                filename = frame.f_code.co_filename
                line = frame.f_lineno
                for header, body_start, end in self._spans_of(filename):
                    if header <= line <= end:
                        seen.add((self.rel(filename), header))
                frame = frame.f_back
            for key in seen:
                self.hits[key] = self.hits.get(key, 0) + 1
            del frame


class _Recorder:
    """Collects torch calls that raised; lives for one run."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.errors: list[dict[str, Any]] = []
        self.by_id: dict[int, dict[str, Any]] = {}
        self._keep: list[BaseException] = []  # keep exceptions alive so ids stay unique
        self.loops: _LoopCounter | None = None

    def loops_on_stack(self) -> list[list[Any]]:
        if self.loops is None:
            return []
        frames = []
        f = sys._getframe(1)
        while f is not None:
            if _is_user_file(f.f_code.co_filename, self.roots):
                frames.append((f, f.f_lineno))
            f = f.f_back
        return self.loops.at(frames, self._rel)

    def loops_in_tb(self, tb) -> list[list[Any]]:
        if self.loops is None:
            return []
        frames = []
        while tb is not None:
            if _is_user_file(tb.tb_frame.f_code.co_filename, self.roots):
                frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        return self.loops.at(frames, self._rel)

    def user_stack(self) -> list[list[Any]]:
        """[file, line] of each frame of the user's code on the current stack, outermost first."""
        out = []
        for fs in traceback.extract_stack():
            if _is_user_file(fs.filename, self.roots):
                out.append([self._rel(fs.filename), fs.lineno or 0])
        return out

    def user_frame_from_stack(self) -> dict[str, Any] | None:
        for fs in reversed(traceback.extract_stack()):
            if _is_user_file(fs.filename, self.roots):
                return self._frame(fs.filename, fs.lineno or 0, fs.name, fs.line or "")
        return None

    def tb_stack(self, tb) -> list[list[Any]]:
        out = []
        while tb is not None:
            code = tb.tb_frame.f_code
            if _is_user_file(code.co_filename, self.roots):
                out.append([self._rel(code.co_filename), tb.tb_lineno])
            tb = tb.tb_next
        return out

    def user_frame_from_tb(self, tb) -> dict[str, Any] | None:
        found = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if _is_user_file(code.co_filename, self.roots):
                found = (code.co_filename, tb.tb_lineno, code.co_name)
            tb = tb.tb_next
        if found is None:
            return None
        filename, line, name = found
        return self._frame(filename, line, name, linecache.getline(filename, line))

    def _rel(self, filename: str) -> str:
        path = os.path.abspath(filename)
        for root in self.roots:
            if _is_under(path, (root,)):
                return os.path.relpath(path, root)
        return path

    def _frame(self, filename: str, line: int, function: str, source: str) -> dict[str, Any]:
        return {"file": self._rel(filename), "line": line, "function": function, "source": source.strip()}

    def note(self, func, args, kwargs, exc: BaseException, call: int | None = None) -> None:
        if id(exc) in self.by_id:
            return  # already seen at an outer call
        record = {
            "call": call,
            "type": _qualified_type(exc),
            "message": _message(exc),
            "ident": id(exc),
            "frame": self.user_frame_from_stack(),
            "stack": self.user_stack(),
            "op": _safe_op_record(func, args, kwargs),
        }
        if self.loops is not None:
            record["loops"] = self.loops_on_stack()
        self.by_id[id(exc)] = record
        self._keep.append(exc)
        if len(self.errors) < MAX_TORCH_ERRORS:
            self.errors.append(record)


def _qualified_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    # torch.OutOfMemoryError is defined in torch._C; name it where users meet it.
    if module.startswith("torch._C") and hasattr(__import__("torch"), cls.__name__):
        return f"torch.{cls.__name__}"
    return f"{module}.{cls.__qualname__}"


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not hide the error itself
        return f"<unprintable {type(exc).__name__}>"


def op_name(func) -> str:
    """A stable, readable name for what a TorchFunctionMode received.

    Tensor methods arrive as descriptors of ``torch._C.TensorBase`` with no module,
    ``torch.gather`` as ``_VariableFunctionsClass.gather``: both get the spelling users
    write (``Tensor.view``, ``torch.gather``).
    """
    name = getattr(func, "__name__", None) or repr(func)
    qual = getattr(func, "__qualname__", name)
    owner = getattr(func, "__objclass__", None)
    if owner is not None and owner.__name__ in ("TensorBase", "Tensor"):
        return f"Tensor.{name}"
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + qual.split(".", 1)[1]
    module = getattr(func, "__module__", None)
    if qual.startswith("_VariableFunctionsClass."):
        qual = name
    if module:
        return f"{module}.{qual}"
    return qual


INLINE_VALUES = 64  # integer/bool tensors up to this many elements are written inline


def save_call(func, args, kwargs, path: str) -> None:
    """Save a torch call as it is about to run: the operator's name, its arguments as a
    structure whose leaves are literals or tensors, each tensor's metadata (dtype,
    shape, stride, storage offset, device, requires_grad, which storage it shares), and
    the tensors themselves (detached, on the CPU).  ``shrinkgpu extract`` rebuilds the
    call from it."""
    import torch

    tensors: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    storages: dict[int, str] = {}

    def enc(value, where: str, depth: int = 0):
        if isinstance(value, torch.Tensor):
            with torch._C.DisableTorchFunctionSubclass():
                t = value.detach()
                try:
                    key = t.untyped_storage().data_ptr()
                except Exception:
                    key = None
                meta[where] = {
                    "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                    "stride": list(t.stride()) if t.layout == torch.strided else None,
                    "offset": t.storage_offset() if t.layout == torch.strided else 0,
                    "device": str(t.device), "requires_grad": bool(value.requires_grad),
                    "shares_with": storages.get(key) if key else None,
                    "parameter": isinstance(value, torch.nn.Parameter),
                }
                if key and key not in storages:
                    storages[key] = where
                tensors[where] = t if t.device.type == "cpu" else t.cpu()
            return {"t": where}
        if isinstance(value, (list, tuple)) and depth < 3 and not isinstance(value, torch.Size):
            return {"seq": [enc(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)],
                    "tuple": isinstance(value, tuple)}
        if isinstance(value, dict) and depth < 3 and all(isinstance(k, str) for k in value):
            return {"map": {k: enc(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}}
        text = _code_literal(value)
        return {"lit": text} if text is not None else {"unknown": type(value).__name__}

    try:  # the keywords the call set to other values than their defaults
        nondefault = sorted({a.split("=", 1)[0] for a in _contract(func, args, kwargs)})
    except Exception:
        nondefault = sorted(kwargs)
    record = {
        "op": op_name(func),
        "args": [enc(a, f"args[{i}]") for i, a in enumerate(args)],
        "kwargs": {k: enc(v, f"kwargs[{k!r}]") for k, v in kwargs.items()},
        "nondefault": nondefault,
        "meta": meta,
    }
    # Small integer and bool tensors (labels, indices, masks) travel as values in the
    # JSON sidecar, so that the script can hold them inline; every tensor is in the .pt.
    for where, t in tensors.items():
        if not t.dtype.is_floating_point and not t.dtype.is_complex and t.numel() <= INLINE_VALUES:
            try:
                meta[where]["values"] = t.tolist()
            except Exception:
                pass
    try:
        torch.save(tensors, path)
    except Exception as exc:  # a tensor subclass torch cannot save: said, not raised
        record["error"] = f"{type(exc).__name__}: {exc}"
    with open(path + ".json", "w", encoding="utf-8") as fh:
        json.dump(record, fh)


_CALL_METHODS = ("__call__", "_call_impl", "_wrapped_call_impl")


def _library_entry(frames: list[tuple[Any, int]], roots: tuple[str, ...]) -> int | None:
    """The index of the user's frame that handed control to a library, skipping library
    frames that only wrap the function the user's line names (a decorator such as
    ``@torch.no_grad()`` around ``model.generate``: the line ``model.generate(...)``
    calls ``generate``, the wrapper is no framework)."""
    import re

    i = 0
    while i < len(frames) - 1:
        here = _is_user_file(frames[i][0].f_code.co_filename, roots)
        if here and not _is_user_file(frames[i + 1][0].f_code.co_filename, roots):
            back = next((j for j in range(i + 1, len(frames)) if _is_user_file(frames[j][0].f_code.co_filename, roots)), None)
            if back is None:
                return i
            line = linecache.getline(frames[i][0].f_code.co_filename, frames[i][1])
            if not re.search(rf"\b{re.escape(frames[back][0].f_code.co_name)}\s*\(", line):
                return i
            i = back
            continue
        i += 1
    return None


def library_cut(exc: BaseException, roots: tuple[str, ...], path: str) -> dict[str, Any] | None:
    """Where the user's code handed control to a library that called back into an object
    of the user's: the statement (``trainer.fit(model, dm)``), the name that object has
    there (``model``), the method the library called on it (``training_step``, or the
    object itself for ``forward`` through ``__call__``) and that call's arguments, saved
    to ``path``.  A candidate can then call the method directly and let deletion remove
    the framework.  A rule over the recorded stack, not a list of frameworks: the deepest
    frame whose ``self`` is bound, by identity, in the user's frame that called the
    library, other than the object the user called."""
    import inspect

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    outer = _library_entry(frames, roots)
    if outer is None:
        return None
    user_frame, user_line = frames[outer]
    scope = {**user_frame.f_globals, **user_frame.f_locals}
    names = {id(v): k for k, v in scope.items() if not k.startswith("__")}
    entry = frames[outer + 1][0]
    entered = entry.f_locals.get("self")  # the object the user called
    # One attribute down from a name the user has (``trainer.model``): what a framework
    # holds for the user, made by the user's own code.
    for key, holder in list(scope.items()):
        if key.startswith("__") or isinstance(holder, type) or type(holder).__name__ == "module":
            continue
        try:
            attributes = vars(holder)
        except TypeError:
            continue
        for attr, value in list(attributes.items())[:256]:
            if not attr.startswith("_") and id(value) not in names and value is not entered:
                names[id(value)] = f"{key}.{attr}"
    # An object the user passed without naming it (``trainer.fit(Net(), loader)``) is
    # found as a parameter of the library's entry function: "arg:<position>" or
    # "kw:<name>" of the user's call, resolved against its text by the reducer.
    entry_info = inspect.getargvalues(entry)
    params = [a for a in entry_info.args if a != "self"]
    for position, param in enumerate(params):
        value = entry_info.locals.get(param)
        if value is not None and id(value) not in names and value is not entered:
            names[id(value)] = f"arg:{position}:{param}"
    chosen = None
    for frame, _line in frames[outer + 1 :]:
        code = frame.f_code
        if not code.co_varnames or code.co_argcount == 0:
            continue
        first = frame.f_locals.get(code.co_varnames[0])
        if first is None or first is entered or id(first) not in names:
            continue
        bound = getattr(type(first), "__call__", None) if code.co_name in _CALL_METHODS else getattr(type(first), code.co_name, None)
        bound = getattr(bound, "__func__", bound)
        if getattr(bound, "__code__", None) is not code:
            continue  # not the method the object has under that name (a hook, a wrapper)
        chosen = (frame, names[id(first)])
    if chosen is None:
        return None
    frame, name = chosen
    info = inspect.getargvalues(frame)
    args = [info.locals[a] for a in info.args[1:]]
    if info.varargs:
        args += list(info.locals.get(info.varargs, ()))
    kwargs = dict(info.locals.get(info.keywords, {})) if info.keywords else {}
    import torch

    torch.save({"args": args, "kwargs": kwargs}, path)
    method = None if frame.f_code.co_name in _CALL_METHODS else frame.f_code.co_name
    return {
        "file": os.path.relpath(os.path.abspath(user_frame.f_code.co_filename), roots[0]),
        "line": user_line,
        "source": linecache.getline(user_frame.f_code.co_filename, user_line).strip(),
        "object": name,
        "entry": entry.f_code.co_name,
        "method": method,
        "library": frames[outer + 1][0].f_code.co_qualname if hasattr(frames[outer + 1][0].f_code, "co_qualname")
        else frames[outer + 1][0].f_code.co_name,
    }


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
        self.written += len(data)
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
    if not path or not _is_user_file(path, roots):
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
        if _is_user_file(tb.tb_frame.f_code.co_filename, roots):
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


def _code_literal(value) -> str | None:
    """Python source for a non-tensor argument: plain literals, and torch's dtypes,
    devices, sizes, layouts and memory formats (``torch.float32``)."""
    text = _literal(value)
    if text is not None:
        return text
    if isinstance(value, slice):
        parts = [_code_literal(v) for v in (value.start, value.stop, value.step)]
        return None if any(p is None for p in parts) else f"slice({', '.join(parts)})"
    if value is Ellipsis:
        return "..."
    cls = type(value)
    if cls.__module__.startswith("torch"):
        if cls.__name__ in ("dtype", "layout", "memory_format"):
            return str(value)
        if cls.__name__ == "device":
            return f"torch.device({str(value)!r})"
        if cls.__name__ == "Size":
            return f"torch.Size({list(value)!r})"
    return None


def _safe_op_record(func, args, kwargs) -> dict[str, Any] | None:
    """The call's record, read with tensor subclasses' ``__torch_function__`` off: a
    subclass may run Python (and raise again) on ``.stride()`` or ``.dtype``, and a note
    must never replace the error it notes."""
    try:
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            return _op_record(func, args, kwargs)
    except Exception:
        try:
            return {"name": op_name(func), "tensors": [], "others": [], "arguments": []}
        except Exception:
            return None


def _op_record(func, args, kwargs) -> dict[str, Any]:
    import torch

    tensors: list[dict[str, Any]] = []
    others: list[str] = []

    def walk(value, path: str, depth: int) -> None:
        if len(tensors) + len(others) >= MAX_FLAT_ARGS:
            return
        if isinstance(value, torch.Tensor):
            tensors.append(_tensor_meta(value, path))
        elif isinstance(value, (list, tuple)) and depth < 3 and not isinstance(value, torch.Size):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]", depth + 1)
        elif isinstance(value, dict) and depth < 3:
            for key, item in value.items():
                walk(item, f"{path}[{key!r}]", depth + 1)
        else:
            others.append(f"{path} = {_short_repr(value)}")

    for i, a in enumerate(args):
        walk(a, f"args[{i}]", 0)
    for k, v in (kwargs or {}).items():
        walk(v, f"kwargs[{k!r}]", 0)
    return {"name": op_name(func), "tensors": tensors, "others": others, "arguments": _contract(func, args, kwargs)}


def _holds_tensor(value, depth: int = 0) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if depth < 3 and isinstance(value, (list, tuple)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    return False


def _same_value(value, default) -> bool:
    try:
        if type(value) is type(default) and bool(value == default):
            return True
    except Exception:
        pass
    return value is default


def _contract(func, args, kwargs) -> list[str]:
    """``name=value`` of each non-tensor argument of the call that differs from its
    default, or has none (``reduction='none'``, ``ignore_index=255``, gather's ``dim``):
    part of what the operator was asked to do, so strict reductions keep it.  Builtins
    without a Python signature name their arguments by position."""
    import inspect

    kwargs = kwargs or {}
    out: list[str] = []
    try:
        sig = inspect.signature(func)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        for i, a in enumerate(args):
            if not _holds_tensor(a):
                out.append(f"args[{i}]={_short_repr(a)}")
        for k, v in kwargs.items():
            if not _holds_tensor(v):
                out.append(f"{k}={_short_repr(v)}")
        return out
    for name, value in bound.arguments.items():
        param = sig.parameters[name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            items = list(value.items())
        else:
            if param.default is not inspect.Parameter.empty and _same_value(value, param.default):
                continue
            items = [(name, value)]
        for key, item in items:
            if not _holds_tensor(item):
                out.append(f"{key}={_short_repr(item)}")
    return out


def _tensor_meta(t, path: str) -> dict[str, Any]:
    # Metadata only: touching values would synchronise (or fail) on a broken CUDA context.
    try:
        stride = list(t.stride())
    except Exception:  # sparse and nested layouts have none
        stride = None
    return {
        "path": path,
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "stride": stride,
        "device": str(t.device),
    }


def _short_repr(value) -> str:
    if value is None or isinstance(value, (bool, int, float, str, slice, type(Ellipsis))):
        text = repr(value)
    else:
        cls = type(value)
        if cls.__module__.startswith("torch") and cls.__name__ in ("dtype", "device", "Size", "layout", "memory_format"):
            text = str(value)
        else:
            text = f"<{cls.__name__}>"
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 3] + "..."


def _make_mode(recorder: _Recorder, capture: dict[str, Any] | None = None):
    from torch.overrides import TorchFunctionMode

    class _WatchTorchCalls(TorchFunctionMode):
        # While this handler runs, torch pops the mode, so nested calls are not seen:
        # what gets recorded is the outermost torch API call, the one the user wrote.
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            key = id(func)
            calls[key] = calls.get(key, 0) + 1
            if capture is not None and calls[key] == capture["call"] and not capture.get("done"):
                if op_name(func) == capture["op"]:
                    # Before the call: on a GPU the values cannot be read after a failed kernel.
                    capture["done"] = True
                    save_call(func, args, kwargs, capture["path"])
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                recorder.note(func, args, kwargs, exc, call=calls[key])
                raise

    calls: dict[int, int] = {}  # the N-th call of each operator: which call failed

    return _WatchTorchCalls()


MAX_PARSES = 8


def _watch_argparse(recorder: _Recorder, parses: list[dict[str, Any]]) -> None:
    """Record what each ``parse_known_args`` (hence ``parse_args``) returned, and where it
    was called from, so a pass can replace the parser by the namespace it produced."""
    import argparse

    original = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, args=None, namespace=None):
        result = original(self, args, namespace)
        if len(parses) < MAX_PARSES:
            frame = recorder.user_frame_from_stack()
            if frame is not None:
                ns = result[0]
                parses.append(
                    {
                        "file": frame["file"],
                        "line": frame["line"],
                        "values": {k: _private_literal(v) for k, v in vars(ns).items()},
                        "caller": frame["source"],
                    }
                )
        return result

    argparse.ArgumentParser.parse_known_args = parse_known_args


# Functions that turn a configuration file into plain values.  Wrapped where the module
# is (or once it gets) imported, so a pass can put the values in place of the read.
CONFIG_LOADERS = {
    "json": ("load", "loads"),
    "yaml": ("safe_load", "load", "full_load", "unsafe_load"),
    "tomllib": ("load", "loads"),
    "tomli": ("load", "loads"),
}
MAX_LOADS = 16
MAX_CONFIG_TEXT = 8000  # longer is data, not a configuration


def _watch_config_loads(recorder: _Recorder, loads: list[dict[str, Any]]) -> None:
    """Record what each configuration read returned, as a literal, and where the user's
    code called it; a call site that returned two different values has none."""
    import functools

    sites: dict[tuple[str, int], dict[str, Any]] = {}

    def wrap(module) -> None:
        for attr in CONFIG_LOADERS.get(module.__name__, ()):
            original = getattr(module, attr, None)
            if original is None or getattr(original, "_shrinkgpu_config_watch", False):
                continue

            def make(original, qualified):
                @functools.wraps(original)
                def loading(*args, **kwargs):
                    value = original(*args, **kwargs)
                    # Only reads the user's code made itself: a library reading its own
                    # files (a model's config.json) is not the script's configuration.
                    caller = sys._getframe(1).f_code.co_filename
                    frame = recorder.user_frame_from_stack() if _is_user_file(caller, recorder.roots) else None
                    if frame is not None:
                        # Written now: the program may change the value later (overrides).
                        _note_load(sites, loads, frame, qualified, value)
                    return value

                loading._shrinkgpu_config_watch = True
                return loading

            try:
                setattr(module, attr, make(original, f"{module.__name__}.{attr}"))
            except (AttributeError, TypeError):
                pass

    _after_import(tuple(CONFIG_LOADERS), wrap)


def _note_load(sites, loads, frame, qualified: str, value) -> None:
    key = (frame["file"], frame["line"])
    text = _config_literal(value)
    if text is not None and len(text) > MAX_CONFIG_TEXT:
        text = None
    known = sites.get(key)
    if known is not None:
        if known["literal"] != text:
            known["literal"] = None  # a loop of reads: no single value stands for them
        return
    if len(loads) >= MAX_LOADS:
        return
    record = {"file": frame["file"], "line": frame["line"], "function": qualified, "literal": text}
    sites[key] = record
    loads.append(record)


def _config_literal(value: Any, depth: int = 0) -> str | None:
    """Source text for a loaded configuration (dicts, lists and scalars), strings from
    the environment or the home directory written as reads of them; None otherwise."""
    if depth > 16:
        return None
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key, item = _config_literal(k, depth + 1), _config_literal(v, depth + 1)
            if key is None or item is None or not isinstance(k, (str, int, float, bool)):
                return None
            parts.append(f"{key}: {item}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, (list, tuple)):
        parts = [_config_literal(v, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        if isinstance(value, tuple):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
        return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
    if value is None or isinstance(value, (bool, int, float, str)):
        return _private_literal(value)
    return None  # dates, custom tags: no plain literal


def _after_import(names: tuple[str, ...], callback) -> None:
    """Call ``callback(module)`` for each of ``names`` now if it is imported, else right
    after its first import (a finder in front of ``sys.meta_path`` that only wraps the
    loader's ``exec_module``; nothing else about importing changes)."""
    import importlib.abc

    pending = set()
    for name in names:
        module = sys.modules.get(name)
        if module is not None:
            callback(module)
        else:
            pending.add(name)
    if not pending:
        return

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname not in pending:
                return None
            pending.discard(fullname)  # our own lookup below must not find us again
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader = spec.loader
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            original = loader.exec_module

            def exec_module(module):
                original(module)
                try:
                    callback(module)
                except Exception:
                    pass  # watching must never break the user's import

            try:
                loader.exec_module = exec_module
            except (AttributeError, TypeError):
                pass
            return spec

    sys.meta_path.insert(0, _Finder())


def _watch_seeding(recorder: _Recorder, sites: list[list[Any]]) -> None:
    """Note the user's call chain at every call that seeds a global generator.

    Reductions must not cut seeding away: the candidate would still fail most of the
    time, and the result would be flaky for the maintainer.  Knowing which seeding
    calls actually ran lets passes protect exactly those.
    """
    import functools
    import random

    def wrap(owner, attr: str) -> None:
        original = getattr(owner, attr, None)
        if original is None or getattr(original, "_shrinkgpu_seed_watch", False):
            return

        @functools.wraps(original)
        def seeding(*args, **kwargs):
            if len(sites) < 256:
                stack = recorder.user_stack()
                # The innermost user frame is the seeding call itself; the rest is the
                # chain of calls that reached it.
                sites.extend([f, n, i == len(stack) - 1] for i, (f, n) in enumerate(stack))
            return original(*args, **kwargs)

        seeding._shrinkgpu_seed_watch = True
        try:
            setattr(owner, attr, seeding)
        except (AttributeError, TypeError):
            pass

    wrap(random, "seed")
    torch = sys.modules.get("torch")
    if torch is not None:
        wrap(torch, "manual_seed")
        wrap(torch, "seed")
        wrap(torch.random, "manual_seed")
        wrap(torch.random, "seed")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None:
            wrap(cuda, "manual_seed")
            wrap(cuda, "manual_seed_all")
    np = sys.modules.get("numpy")
    if np is not None:
        wrap(np.random, "seed")


# The run's root directories (set by ``run``): paths under them are the run's own copy.
_RUN_ROOTS: tuple[str, ...] = ()

# Environment values shorter than this are words ("cpu", "1"), not secrets.
MIN_PRIVATE = 6


def _private_literal(value: Any) -> str | None:
    """Source text for a parsed value that never bakes a private value into a script: a
    string read from the environment stays a read of the environment, an expanded ``~``
    stays ``~``; a string that merely contains such a value has no literal (None)."""
    if isinstance(value, str):
        if _RUN_ROOTS and os.path.isabs(value) and _is_under(os.path.normpath(value), _RUN_ROOTS):
            # A path into the run's own copy (``os.path.dirname(__file__)``): every run has
            # its own copy, so only the path from the working directory means the same file.
            try:
                return repr(os.path.relpath(value, os.getcwd()))
            except ValueError:
                return None
        home = os.path.expanduser("~")
        if home not in ("/", "") and (value == home or value.startswith(home + os.sep)):
            return f'__import__("os").path.expanduser({("~" + value[len(home):])!r})'
        for name, env_value in os.environ.items():
            if len(env_value) < MIN_PRIVATE or name in ("PWD", "OLDPWD", "_"):
                continue
            if value == env_value:
                return f'__import__("os").environ[{name!r}]'
        if any(len(v) >= MIN_PRIVATE and v in value for v in os.environ.values()):
            return None
    elif isinstance(value, (list, tuple)):
        if any(isinstance(v, str) and _private_literal(v) != _literal(v) for v in value):
            return None
    return _literal(value)


def _literal(value: Any) -> str | None:
    """Source text that evaluates to ``value``, or None when there is none."""
    import ast
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, (list, tuple)) and len(value) <= 64
    ):
        text = repr(value)
        try:
            if ast.literal_eval(text) == value:
                return text
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception that ended the run, then its causes down to the root."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        # Follow __context__ even under ``raise ... from None``: the hidden original is
        # still the first error.
        cur = cur.__cause__ if cur.__cause__ is not None else cur.__context__
    return out


def _record_chain(exc: BaseException, recorder: _Recorder) -> list[dict[str, Any]]:
    records = []
    for e in _chain(exc):
        seen = recorder.by_id.get(id(e))
        if seen is not None:
            records.append(seen)
            continue
        records.append(
            {
                "type": _qualified_type(e),
                "message": _message(e),
                "ident": id(e),
                "frame": recorder.user_frame_from_tb(e.__traceback__),
                "stack": recorder.tb_stack(e.__traceback__),
                "op": None,
            }
        )
        if recorder.loops is not None:
            records[-1]["loops"] = recorder.loops_in_tb(e.__traceback__)
    return records


def _modules(roots: tuple[str, ...]) -> list[list[Any]]:
    """[name, file, path relative to the run's root or None], in import order.

    sys.modules keeps insertion order, so importing in this order reproduces the run's.
    """
    out = []
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        local = None
        if isinstance(file, str) and not os.path.isabs(file):
            file = None  # a relative __file__ (torch.ops) would resolve against the run's cwd
        if isinstance(file, str):
            path = os.path.abspath(file)
            for root in roots:
                if _is_under(path, (root,)):
                    local = os.path.relpath(path, root)
                    break
        out.append([name, file if isinstance(file, str) else None, local])
    return out


def _environment() -> dict[str, Any]:
    """Versions and backend, for the maintainer's report.  Never initialises CUDA: device
    names are read only if the script itself did."""
    import platform

    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    torch = sys.modules.get("torch")
    if torch is None:
        return env
    version = getattr(torch, "version", None)
    env["torch"] = getattr(torch, "__version__", None)
    env["cuda"] = getattr(version, "cuda", None)
    env["hip"] = getattr(version, "hip", None)
    env["threads"] = thread_counts()
    try:
        if torch.cuda.is_initialized():
            env["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:  # a broken context after a device-side assert
        env["devices_error"] = _message(exc).splitlines()[0] if _message(exc) else type(exc).__name__
    return env


def prepare_process(req: dict[str, Any], *, forked: bool) -> None:
    """Make this process look like ``python SCRIPT ARGS`` started in the user's cwd."""
    os.chdir(req["cwd"])
    sys.argv = list(req["argv"])
    if req.get("module"):
        # python -m: argv[0] is the module's full path, the module name is in orig_argv,
        # and the working directory heads the path.
        sys.argv[0] = os.path.abspath(req["script"])
        sys.orig_argv = [sys.executable, "-m", req["module"], *req["argv"][1:]]
        path0 = os.getcwd()
    else:
        sys.orig_argv = [sys.executable, *req["argv"]]
        path0 = os.path.dirname(os.path.abspath(req["script"]))
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    if forked:
        _fresh_random_state()
        # A preloaded module may have asked for the temporary directory already; the
        # script must get the one its environment names (the run's own, see Runner).
        tempfile = sys.modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None


def disown_finalizers() -> None:
    """Called in the supervisor once it has preloaded: the finalizers made so far belong
    to it, not to any script, and a forked child must not run them at exit.  They are
    library teardown done at import (torch registers one per operator library, about
    170, and running them took 30 ms of a 70 ms candidate), and one that removes a directory a module made at import
    would remove the supervisor's, shared by every later child.  The script's own
    finalizers (a ``TemporaryDirectory`` it never closed) are made after this and run as
    under ``python script.py``; ``atexit`` callbacks are kept as they are (logging's
    shutdown flushes the script's handlers)."""
    import weakref

    for fin in list(getattr(weakref.finalize, "_registry", {})):
        try:
            fin.atexit = False
        except Exception:  # a private registry of the stdlib; never worth failing a run
            pass


# Variables that size thread pools at library load: a fresh interpreter reads them, and
# a forked child has them set too, for the processes it starts.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(count: int) -> None:
    """Size this process's pools to ``count`` threads, as ``OMP_NUM_THREADS=count`` (and
    the BLAS variables) would have at load: called in the supervisor after preloading,
    where the variables come too late; forked children inherit the sizes."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(count)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a dependency; a broken install must not stop the run
        return
    try:
        threadpool_limits(limits=count)
    except Exception:
        pass


def thread_counts() -> dict[str, Any]:
    """The thread pools' sizes as the script sees them, for the report and the jobs rule."""
    out: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch"] = torch.get_num_threads()
            out["torch_interop"] = torch.get_num_interop_threads()
        except Exception:
            pass
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_info

            blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
            if blas:
                out["blas"] = max(blas)
        except Exception:
            pass
    return out


def _fresh_random_state() -> None:
    """A fresh interpreter seeds Python's, NumPy's and torch's default generators from
    the OS; so must a fork.  Otherwise every candidate would share the parent's streams,
    and a candidate that deleted the script's seeding would look deterministic during
    reduction and fail only sometimes afterwards."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed()
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()


def run(req: dict[str, Any], *, forked: bool) -> int:
    """Run the request's script; write the observation; return the exit status."""
    started = time.perf_counter()
    obs: dict[str, Any] = {"status": "ok", "exit_code": 0, "chain": [], "torch_errors": []}
    roots = tuple(os.path.abspath(r) for r in req["roots"])
    global _RUN_ROOTS
    _RUN_ROOTS = roots
    recorder = _Recorder(roots)
    try:
        prepare_process(req, forked=forked)
        if req.get("crash_log"):
            _dump_stack_on_crash(req["crash_log"])
        script = os.path.abspath(req["script"])
        if req.get("capture_ops", True):
            import torch  # noqa: F401  (the mode needs it; the script imports it anyway)

            mode = _make_mode(recorder, req.get("capture"))
        else:
            mode = None
        parses: list[dict[str, Any]] = []
        seed_sites: list[list[Any]] = []
        loads: list[dict[str, Any]] = []
        if req.get("watch_argparse", True):
            _watch_argparse(recorder, parses)
            _watch_config_loads(recorder, loads)
        _watch_seeding(recorder, seed_sites)
        clock = None
        if req.get("count_loops"):
            recorder.loops = _LoopCounter(roots)
            recorder.loops.install()
            clock = _LoopClock(roots, recorder._rel)
            clock.start()
    except BaseException as exc:  # the probe failed before the script ran
        traceback.print_exc()
        obs.update(status="probe-error", exit_code=EXIT_PROBE_FAILURE, chain=[])
        obs["probe_error"] = _message(exc)
        _write(req["observation"], obs)
        return EXIT_PROBE_FAILURE

    reads: list[str] = []
    _watch_reads(roots, reads)
    module = req.get("module")
    code = 0
    try:
        if mode is not None:
            with mode:
                _run_main(script, module)
        else:
            _run_main(script, module)
    except SystemExit as exc:
        code = _exit_code(exc)
        if code != 0:
            obs["status"] = "exit"
            obs["chain"] = _record_chain(exc, recorder)
    except BaseException as exc:
        code = 1
        obs["status"] = "exception"
        obs["chain"] = _record_chain(exc, recorder)
        _print_traceback(exc, script)
        if req.get("cut"):
            try:
                obs["cut"] = library_cut(exc, roots, req["cut"])
            except Exception:  # a cut is an offer; its failure must not change the run
                obs["cut"] = None
        if req.get("save_objects"):
            try:
                obs["saved_objects"] = saved_objects(exc, roots, req["save_objects"])
            except Exception:  # an offer too
                obs["saved_objects"] = []
    if recorder.loops is not None:
        sys.settrace(None)
    if clock is not None:
        obs["loop_time"] = clock.stop()
    obs["exit_code"] = code
    obs["torch_errors"] = recorder.errors
    obs["parses"] = parses
    obs["loads"] = loads
    obs["reads"] = sorted(set(reads))
    obs["seed_sites"] = sorted({(f, n, bool(inner)) for f, n, inner in seed_sites})
    obs["duration"] = time.perf_counter() - started
    if req.get("collect_modules"):
        obs["modules"] = _modules(roots)
    if req.get("collect_env"):
        obs["environment"] = _environment()
    _flush()
    _write(req["observation"], obs)
    _exit_handlers()
    return code


_crash_file = None  # kept open for the process's lifetime: faulthandler writes to its fd


def _dump_stack_on_crash(path: str) -> None:
    """Have a death by SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL leave the Python stack in its own
    file (the last user frame tells two crashes apart), not on the script's stderr, which
    stays as ``python script.py`` writes it.  The signal still kills the process."""
    global _crash_file
    import faulthandler

    try:
        _crash_file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - must outlive this call
        faulthandler.enable(file=_crash_file, all_threads=False)
    except (OSError, ValueError, RuntimeError):
        pass


def _exit_handlers() -> None:
    """What ``python script.py`` does after the script: ``atexit`` callbacks, which
    include ``weakref.finalize`` objects such as a ``TemporaryDirectory`` the script never
    closed.  Non-daemon threads are not waited for (the run is over once the script's
    main code returned or raised); an exception in a callback is printed, as Python
    does, and changes nothing."""
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - the observation is written; nothing may undo it
        pass
    _flush()


MAX_READS = 256


def _watch_reads(roots: tuple[str, ...], reads: list[str]) -> None:
    """Note the files under the run's root the script opens (audit event ``open``): the
    data a result needs beside it, and files an output must never overwrite."""

    def hook(event: str, args) -> None:
        if event != "open" or len(reads) >= MAX_READS:
            return
        try:
            path = args[0]
            if not isinstance(path, (str, bytes, os.PathLike)) or isinstance(path, int):
                return
            full = os.path.abspath(os.fsdecode(path))
        except Exception:
            return
        for root in roots:
            if _is_under(full, (root,)) and "__pycache__" not in full:
                reads.append(os.path.relpath(full, root))
                return

    try:
        sys.addaudithook(hook)
    except Exception:
        pass


def _run_main(path: str, module: str | None = None) -> None:
    """Execute ``path`` as ``__main__`` the way ``python path`` does (or, with
    ``module``, the way ``python -m module`` does: package-relative imports work).

    Not ``runpy.run_path``: it rewrites ``sys.argv[0]`` to the path it is given, while
    Python keeps argv[0] as typed and makes only ``__file__`` absolute.
    """
    if module:
        import runpy

        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    import builtins
    import importlib.machinery
    import types

    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__cached__ = None
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    module.__spec__ = None
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _print_traceback(exc: BaseException, script: str) -> None:
    """Print the traceback Python would print, without the probe's own frames on top."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    try:
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
    except Exception:
        pass


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        print(exc.code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def _write(path: str, obs: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obs, fh, default=str)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    """The fresh-interpreter path (see the supervisor's ``FRESH_COMMAND``)."""
    argv = sys.argv[1:] if argv is None else argv
    req = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    code = run(req, forked=False)
    # Like the fork path: no waiting for non-daemon threads the script left behind;
    # the run is over once the script's main code returned or raised.
    os._exit(code)


if __name__ == "__main__":
    main()
