"""Where the user's code handed control to a library that called back into the user's
object: the call to make directly instead (passes/library.py)."""

from __future__ import annotations

import linecache
import os
from typing import Any

from shrinkgpu.worker.probe.loops import entry_arguments
from shrinkgpu.worker.probe.paths import is_user_file, of_users_class

_CALL_METHODS = ("__call__", "_call_impl", "_wrapped_call_impl")
# What the receiver's attributes may take in the saved call, all together.
ATTRIBUTES_MAX_BYTES = 64 << 20
# nn.Module's own flag: set on the top module alone it would disagree with its submodules.
_NOT_RESTORED = frozenset({"training"})


def _plain(value, depth: int = 0) -> int | None:
    """The bytes ``value`` takes when it is plain data (numbers, strings, tensors that are
    not parameters, arrays, and lists, dicts and dataclasses of those), else None: what
    a library's loop set on an object (a ``TrainerState``'s epoch, weights a callback
    computed), not a model, an optimizer or a handle."""
    import dataclasses
    import sys

    if value is None or isinstance(value, (bool, int, float, complex)):
        return 8
    if isinstance(value, (str, bytes)):
        return len(value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return None if isinstance(value, torch.nn.Parameter) else value.numel() * value.element_size()
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return None if value.dtype == object else int(value.nbytes)
    if depth >= 4:
        return None
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        items = list(value)
    elif type(value) is dict:
        if not all(isinstance(k, (str, int)) for k in value):
            return None
        items = list(value.values())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    else:
        return None
    if len(items) > 1024:
        return None
    total = 0
    for item in items:
        size = _plain(item, depth + 1)
        if size is None:
            return None
        total += size
    return total


def _named_attributes(roots: tuple[str, ...]) -> set[str]:
    """The attribute names the user's loaded files write (``.class_weights``, ``.state``)."""
    import re
    import sys

    named: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py") or not is_user_file(path, roots):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                named.update(re.findall(r"\.\s*([A-Za-z_]\w*)", fh.read()))
        except OSError:
            continue
    return named


def _receiver_attributes(obj, roots: tuple[str, ...]) -> dict[str, Any]:
    """The public plain attributes of a receiver whose class the user wrote (a
    ``Trainer`` subclass, a ``LightningModule``), as they were at the failure, that the
    user's own code names: the object the cut calls is built afresh, and what the
    library's loop set on it before the failing call (the epoch, weights a callback
    computed) would be missing.  Only what the user's code names: a library's own flags
    (a ``Trainer`` has thirty) would make the cut larger than what it replaces, and a
    cut that grows the program is never tried.  Each is one statement of the cut, for
    deletion to drop when the bug does not need it."""
    if obj is None or not of_users_class(obj, roots):
        return {}
    attributes = vars(obj)
    named = _named_attributes(roots)
    out: dict[str, Any] = {}
    total = 0
    for name, value in list(attributes.items())[:256]:
        if name.startswith("_") or name in _NOT_RESTORED or name not in named:
            continue
        size = _plain(value)
        if size is None or total + size > ATTRIBUTES_MAX_BYTES:
            continue
        total += size
        out[name] = value
    return out


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
            back = next((j for j in range(i + 1, len(frames)) if is_user_file(frames[j][0].f_code.co_filename, roots)),
                        None)
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


def library_cut(exc: BaseException, roots: tuple[str, ...], path: str, autocast=()) -> dict[str, Any] | None:
    """Where the user's code handed control to a library that called back into an object
    of the user's: the statement (``trainer.fit(model, dm)``), the name that object has
    there (``model``), the method the library called on it (``training_step``, or the
    object itself for ``forward`` through ``__call__``) and that call's arguments, saved
    to ``path``.  A candidate can then call the method directly and let deletion remove
    the framework.  A rule over the recorded stack, not a list of frameworks: the deepest
    frame whose ``self`` is bound, by identity, in the user's frame that called the
    library, other than the object the user called.  ``autocast``: the autocasts in force
    where the failing torch call raised ([device type, dtype]): a framework's mixed
    precision (Lightning's ``precision="bf16-mixed"``, the HF Trainer's ``bf16=True``)
    is entered by the library, so the direct call must enter it too."""
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
        # the method itself, whose code is compared (callable() would only say there is one)
        attr = "__call__" if code.co_name in _CALL_METHODS else code.co_name
        bound = getattr(type(first), attr, None)
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
    # The arguments as the library passed them: at the failure a parameter may have been
    # rebound or emptied (``labels = inputs.pop("labels")``), and the call made directly
    # with that would fail otherwise.
    came_in = {**info.locals, **entry_arguments(frame)}
    args = [came_in[a] for a in info.args[1 if receiver else 0 :]]
    if info.varargs:
        args += list(came_in.get(info.varargs, ()))
    kwargs = dict(came_in.get(info.keywords, {})) if info.keywords else {}
    import torch

    attributes = _receiver_attributes(frame.f_locals.get(frame.f_code.co_varnames[0]), roots) if receiver else {}
    torch.save({"args": args, "kwargs": kwargs, "attributes": attributes}, path)
    method = None if not receiver or frame.f_code.co_name in _CALL_METHODS else frame.f_code.co_name
    return {
        "attributes": sorted(attributes),
        "autocast": [list(a) for a in autocast],
        "file": os.path.relpath(os.path.abspath(user_frame.f_code.co_filename), roots[0]),
        "line": user_line,
        "source": linecache.getline(user_frame.f_code.co_filename, user_line).strip(),
        "object": name,
        "entry": entry.f_code.co_name,
        "method": method,
        "library": frames[outer + 1][0].f_code.co_qualname if hasattr(frames[outer + 1][0].f_code, "co_qualname")
        else frames[outer + 1][0].f_code.co_name,
        "call": _encoded(args, kwargs, attributes, roots),
    }


def _encoded(args, kwargs, attributes, roots: tuple[str, ...]) -> dict[str, Any] | None:
    """The saved call as ``encode_call`` writes it, for the parent to write it as source:
    small tensors with their values, modules as they were built.  None when it cannot
    be read so (the pickle stays the only form)."""
    from shrinkgpu.worker.probe.compiled import module_source
    from shrinkgpu.worker.probe.ops import encode_call

    try:
        def built(module):
            return module_source(module, roots)

        enc_args, enc_kwargs, meta, _ = encode_call(args, kwargs, built)
        _, enc_attributes, more, _ = encode_call((), attributes, built, names=("args", "attributes"))
        return {"args": enc_args, "kwargs": enc_kwargs, "attributes": enc_attributes, "meta": {**meta, **more}}
    except Exception:  # an offer: the saved call stands without it
        return None
