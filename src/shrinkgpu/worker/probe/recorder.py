"""The torch calls that raised and the exception chain that ended the run, with the
user's frames of each: what the reducer's signature is made from."""

from __future__ import annotations

import ast
import linecache
import os
import sys
import traceback
from typing import Any

from shrinkgpu.worker.probe.loops import LoopCounter
from shrinkgpu.worker.probe.ops import safe_op_record, torch_check_record
from shrinkgpu.worker.probe.paths import is_under, is_user_file

MAX_TORCH_ERRORS = 16


class Recorder:
    """Collects torch calls that raised; lives for one run."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.errors: list[dict[str, Any]] = []
        self.by_id: dict[int, dict[str, Any]] = {}
        self._keep: list[BaseException] = []  # keep exceptions alive so ids stay unique
        self.loops: LoopCounter | None = None

    def loops_on_stack(self) -> list[list[Any]]:
        if self.loops is None:
            return []
        frames = []
        f = sys._getframe(1)
        while f is not None:
            if is_user_file(f.f_code.co_filename, self.roots):
                frames.append((f, f.f_lineno))
            f = f.f_back
        return self.loops.at(frames, self.rel)

    def loops_in_tb(self, tb) -> list[list[Any]]:
        if self.loops is None:
            return []
        frames = []
        while tb is not None:
            if is_user_file(tb.tb_frame.f_code.co_filename, self.roots):
                frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        return self.loops.at(frames, self.rel)

    def user_stack(self) -> list[list[Any]]:
        """[file, line] of each frame of the user's code on the current stack, outermost first."""
        out = []
        for fs in traceback.extract_stack():
            if is_user_file(fs.filename, self.roots):
                out.append([self.rel(fs.filename), fs.lineno or 0])
        return out

    def user_frame_from_stack(self) -> dict[str, Any] | None:
        for fs in reversed(traceback.extract_stack()):
            if is_user_file(fs.filename, self.roots):
                return self._frame(fs.filename, fs.lineno or 0, fs.name, fs.line or "")
        return None

    def tb_stack(self, tb) -> list[list[Any]]:
        out = []
        while tb is not None:
            code = tb.tb_frame.f_code
            if is_user_file(code.co_filename, self.roots):
                out.append([self.rel(code.co_filename), tb.tb_lineno])
            tb = tb.tb_next
        return out

    def user_frame_from_tb(self, tb) -> dict[str, Any] | None:
        found = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if is_user_file(code.co_filename, self.roots):
                found = (code, tb.tb_lineno, tb.tb_lasti)
            tb = tb.tb_next
        if found is None:
            return None
        code, line, lasti = found
        frame = self._frame(code.co_filename, line, code.co_name, linecache.getline(code.co_filename, line))
        frame["callee"] = raising_callee(code, lasti)
        return frame

    def rel(self, filename: str) -> str:
        path = os.path.abspath(filename)
        for root in self.roots:
            if is_under(path, (root,)):
                return os.path.relpath(path, root)
        return path

    def _frame(self, filename: str, line: int, function: str, source: str) -> dict[str, Any]:
        return {"file": self.rel(filename), "line": line, "function": function, "source": source.strip()}

    def note(self, func, args, kwargs, exc: BaseException, call: int | None = None) -> None:
        if id(exc) in self.by_id:
            return  # already seen at an outer call
        record = {
            "call": call,
            "type": qualified_type(exc),
            "message": message_of(exc),
            "ident": id(exc),
            "frame": self.user_frame_from_stack(),
            "stack": self.user_stack(),
            "op": safe_op_record(func, args, kwargs),
            "raised_by": raised_by(exc.__traceback__),
        }
        if self.loops is not None:
            record["loops"] = self.loops_on_stack()
        modes = autocast_state()
        if modes:
            record["autocast"] = modes
        self.by_id[id(exc)] = record
        self._keep.append(exc)
        if len(self.errors) < MAX_TORCH_ERRORS:
            self.errors.append(record)


def raised_by(tb) -> str | None:
    """The innermost module of torch the traceback passes through (where torch raised
    it, or called the code that did): an error raised in a compiled graph's backward
    names AOT autograd's runtime, the same error raised eagerly names the autograd
    engine (families.py).  ``torch`` itself is passed over: its ``torch._check``
    helpers raise for whichever module called them."""
    found = None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__")
        if isinstance(name, str) and name.startswith("torch."):
            found = name
        tb = tb.tb_next
    return found


def autocast_state() -> list[list[str]]:
    """[device type, dtype] of each autocast in force: read where a torch call raised,
    since the ``with`` that entered it (a framework's mixed precision) has exited by the
    time the exception reaches the probe."""
    import torch

    out = []
    for device in ("cuda", "cpu", "xpu", "mps"):
        try:
            if torch.is_autocast_enabled(device):
                out.append([device, str(torch.get_autocast_dtype(device))])
        except Exception:  # a device type this build does not know
            continue
    return out


def qualified_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    # torch.OutOfMemoryError is defined in torch._C; name it where users meet it.
    if module.startswith("torch._C") and hasattr(__import__("torch"), cls.__name__):
        return f"torch.{cls.__name__}"
    return f"{module}.{cls.__qualname__}"


def message_of(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not hide the error itself
        return f"<unprintable {type(exc).__name__}>"


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception that ended the run, then its causes down to the root, as Python
    displays the chain: ``__cause__`` (``raise ... from e``), else ``__context__`` (raised
    while handling it) unless ``raise ... from None`` suppressed it.  The first error is
    what the user saw and copies into ``--keep-error``; a suppressed context is recorded
    beside it (``suppressed_context``)."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        if cur.__cause__ is not None:
            cur = cur.__cause__
        elif cur.__suppress_context__:
            cur = None
        else:
            cur = cur.__context__
    return out


def suppressed_context(exc: BaseException) -> BaseException | None:
    """The exception ``raise ... from None`` hid at the root of the displayed chain (what
    the code was handling when it raised the first error), or None."""
    root = exception_chain(exc)[-1]
    if root.__cause__ is None and root.__suppress_context__ and root.__context__ is not None:
        return root.__context__
    return None


def _record(e: BaseException, recorder: Recorder) -> dict[str, Any]:
    seen = recorder.by_id.get(id(e))
    if seen is not None:
        return seen
    record = {
        "type": qualified_type(e),
        "message": message_of(e),
        "ident": id(e),
        "frame": recorder.user_frame_from_tb(e.__traceback__),
        "stack": recorder.tb_stack(e.__traceback__),
        # raised by torch's own Python code (a module's input check): that torch call
        "op": torch_check_record(e.__traceback__, recorder.roots),
        "raised_by": raised_by(e.__traceback__),
    }
    if recorder.loops is not None:
        record["loops"] = recorder.loops_in_tb(e.__traceback__)
    return record


def record_chain(exc: BaseException, recorder: Recorder) -> list[dict[str, Any]]:
    return [_record(e, recorder) for e in exception_chain(exc)]


def record_suppressed(exc: BaseException, recorder: Recorder) -> dict[str, Any] | None:
    hidden = suppressed_context(exc)
    return None if hidden is None else _record(hidden, recorder)


def raising_callee(code, lasti: int) -> str | None:
    """The callable, as the source spells it (``AUROC``, ``self.metric``, ``json.load``),
    of the call a frame was making when the error came through it: what Python marks
    under the line.  None when it was no call (a ``raise``, an operator, a subscript) or
    Python does not say (before 3.11)."""
    positions = getattr(code, "co_positions", None)
    if positions is None or lasti < 0:
        return None
    try:
        start, end, col, end_col = list(positions())[lasti // 2]
    except (IndexError, ValueError):
        return None
    if None in (start, end, col, end_col):
        return None
    # the columns count bytes of the UTF-8 source
    lines = [linecache.getline(code.co_filename, n).encode() for n in range(start, end + 1)]
    segment = lines[0][col:end_col] if start == end else lines[0][col:] + b"".join(lines[1:-1]) + lines[-1][:end_col]
    try:
        node = ast.parse(segment.decode(), mode="eval").body
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None
    return ast.unparse(node.func) if isinstance(node, ast.Call) else None
