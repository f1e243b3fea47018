"""Where the user's code handed control to a library that called back into the user's
object: the call to make directly instead (passes/library.py)."""

from __future__ import annotations

import linecache
import os
from typing import Any

from shrinkgpu.worker.probe.paths import is_user_file


_CALL_METHODS = ("__call__", "_call_impl", "_wrapped_call_impl")


def _library_entry(frames: list[tuple[Any, int]], roots: tuple[str, ...]) -> int | None:
    """The index of the user's frame that handed control to a library, skipping library
    frames that only wrap the function the user's line names (a decorator such as
    ``@torch.no_grad()`` around ``model.generate``: the line ``model.generate(...)``
    calls ``generate``, the wrapper is no framework)."""
    import re

    i = 0
    while i < len(frames) - 1:
        here = is_user_file(frames[i][0].f_code.co_filename, roots)
        if here and not is_user_file(frames[i + 1][0].f_code.co_filename, roots):
            back = next((j for j in range(i + 1, len(frames)) if is_user_file(frames[j][0].f_code.co_filename, roots)), None)
            if back is None:
                return i
            line = linecache.getline(frames[i][0].f_code.co_filename, frames[i][1])
            if not re.search(rf"\b{re.escape(frames[back][0].f_code.co_name)}\s*\(", line):
                return i
            i = back
            continue
        i += 1
    return None


def _plain_function(frames: list[tuple[Any, int]], functions: dict[Any, str], roots: tuple[str, ...]):
    """The first function the library called that the user's frame reaches by name
    (``collate`` handed to a ``DataLoader`` as ``collate_fn``, a loss or a ``map``
    function; ``loader.collate_fn`` when the loader calls its default one): (its frame,
    that name), or None.  A plain function's arguments are all of its inputs, so the call
    made directly needs none of the library's loop before it.  The first of the user's
    own frames ends the search: what the user's function calls next is the user's code,
    for the passes to reduce."""
    for frame, _line in frames:
        name = functions.get(frame.f_code)
        if name is not None:
            return frame, name
        if is_user_file(frame.f_code.co_filename, roots):
            return None
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
    # The functions the user's frame reaches by name, the same way (``collate``, and a
    # library's function a user's object holds: ``loader.collate_fn``).
    # (plain functions only: a method's call needs its object, found above)
    functions = {v.__code__: k for k, v in scope.items() if not k.startswith("__") and inspect.isfunction(v)}
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
            if not attr.startswith("_") and inspect.isfunction(value):
                functions.setdefault(value.__code__, f"{key}.{attr}")
    # An object the user passed without naming it (``trainer.fit(Net(), loader)``) is
    # found as a parameter of the library's entry function: "arg:<position>" or
    # "kw:<name>" of the user's call, resolved against its text by the reducer.
    entry_info = inspect.getargvalues(entry)
    params = [a for a in entry_info.args if a != "self"]
    for position, param in enumerate(params):
        value = entry_info.locals.get(param)
        if value is not None and id(value) not in names and value is not entered:
            names[id(value)] = f"arg:{position}:{param}"
    # The object the user called is the one to call directly too when the library's
    # named method (``trainer.train()``, ``sched.step()``, not ``model(x)``) called back
    # into a method the user's own subclass defines (``compute_loss``, ``get_lr``): the
    # framework's loop before that call is what the cut drops.
    callback = entry.f_code.co_name not in _CALL_METHODS
    chosen = None
    for frame, _line in frames[outer + 1 :]:
        code = frame.f_code
        if not code.co_varnames or code.co_argcount == 0:
            continue
        first = frame.f_locals.get(code.co_varnames[0])
        if first is None or id(first) not in names:
            continue
        if first is entered and not (callback and frame is not entry and is_user_file(code.co_filename, roots)):
            continue
        bound = getattr(type(first), "__call__", None) if code.co_name in _CALL_METHODS else getattr(type(first), code.co_name, None)
        bound = getattr(bound, "__func__", bound)
        if getattr(bound, "__code__", None) is not code:
            continue  # not the method the object has under that name (a hook, a wrapper)
        chosen = (frame, names[id(first)])
    receiver = chosen is not None
    if chosen is None:
        chosen = _plain_function(frames[outer + 1 :], functions, roots)
    if chosen is None:
        return None
    frame, name = chosen
    info = inspect.getargvalues(frame)
    args = [info.locals[a] for a in info.args[1 if receiver else 0 :]]
    if info.varargs:
        args += list(info.locals.get(info.varargs, ()))
    kwargs = dict(info.locals.get(info.keywords, {})) if info.keywords else {}
    import torch

    torch.save({"args": args, "kwargs": kwargs}, path)
    method = None if not receiver or frame.f_code.co_name in _CALL_METHODS else frame.f_code.co_name
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
