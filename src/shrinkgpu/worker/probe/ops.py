"""Torch calls as the user wrote them: a ``TorchFunctionMode`` that notes the calls that
raise, with each argument's dtype, shape, stride and device and the operator's
non-default arguments, and saves one call's arguments for the extraction."""

from __future__ import annotations

import functools
import json
import os
from itertools import chain
from typing import Any, Callable

from shrinkgpu.worker.probe.literals import literal
from shrinkgpu.worker.protocol import Capture

MAX_FLAT_ARGS = 64


REPR_LIMIT = 80


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


INLINE_VALUES = 64  # tensors up to this many elements are written inline


# torch._dynamo's marks on a tensor, by the call that sets them
_DYNAMO_MARKS = (("_dynamo_dynamic_indices", "mark_dynamic"), ("_dynamo_weak_dynamic_indices", "maybe_mark_dynamic"),
                 ("_dynamo_static_indices", "mark_static"), ("_dynamo_unbacked_indices", "mark_unbacked"))


def encode_call(args, kwargs, module_source: Callable[[Any], str | None] | None = None,
                names: tuple[str, str] = ("args", "kwargs")):
    """A call's arguments as a structure whose leaves are literals or tensors (each tensor
    by its place, ``{"t": "args[0]"}``), with each tensor's metadata (dtype, shape,
    stride, storage offset, device, requires_grad, which storage it shares, the
    dimensions ``torch._dynamo.mark_dynamic`` and its kin marked, and its values when it
    is small: what lets the parent write it as a literal) and the tensors themselves
    (detached, on the CPU): (args, kwargs, meta, tensors).  ``module_source``: how an
    ``nn.Module`` argument is built (``torch.nn.Linear(4, 2)``), or None where it is not
    known; without it a module is an unknown leaf.  ``names``: what the places of the
    positional and keyword arguments start with."""
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
                # (how Dynamo treats a dimension is part of a compiled call; a copy of the
                # tensor does not keep it)
                marks = {call: sorted(int(d) for d in getattr(value, attr, None) or ())
                         for attr, call in _DYNAMO_MARKS}
                marks = {call: dims for call, dims in marks.items() if dims}
                if marks:
                    meta[where]["marks"] = marks
                if key and key not in storages:
                    storages[key] = where
                tensors[where] = t if t.device.type == "cpu" else t.cpu()
                _note_values(tensors[where], meta[where])
            return {"t": where}
        if isinstance(value, (list, tuple)) and depth < 3 and not isinstance(value, torch.Size):
            return {"seq": [enc(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)],
                    "tuple": isinstance(value, tuple)}
        if isinstance(value, dict) and depth < 3 and all(isinstance(k, str) for k in value):
            return {"map": {k: enc(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}}
        text = code_literal(value)
        if text is None and module_source is not None and isinstance(value, torch.nn.Module):
            built = module_source(value)
            if built is not None:
                return {"module": built}
        return {"lit": text} if text is not None else {"unknown": type(value).__name__}

    encoded_args = [enc(a, f"{names[0]}[{i}]") for i, a in enumerate(args)]
    encoded_kwargs = {k: enc(v, f"{names[1]}[{k!r}]") for k, v in kwargs.items()}
    return encoded_args, encoded_kwargs, meta, tensors


def _note_values(t, meta: dict[str, Any]) -> None:
    """A small tensor's values in its metadata (labels, indices, masks, and a handful of
    floats), so that a script can hold them inline; whether a floating-point tensor holds
    a NaN or an inf."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        # A NaN or an inf is the bug's own value: random numbers of the same shape
        # would fail another check with the same message (multinomial's "inf, nan
        # or element < 0" takes a negative number too).
        try:
            meta["nonfinite"] = not bool(torch.isfinite(t).all())
        except Exception:
            pass
    # (complex numbers have no JSON form; a quantized or sparse tensor no plain list)
    if t.numel() <= INLINE_VALUES and not t.dtype.is_complex and t.layout == torch.strided and not t.is_quantized:
        try:
            meta["values"] = t.tolist()
        except Exception:
            pass


def save_call(func, args, kwargs, path: str, extra: dict[str, Any] | None = None,
              more_tensors: dict[str, Any] | None = None) -> None:
    """Save a torch call as it is about to run: the operator's name, its arguments as
    ``encode_call`` writes them, and the tensors themselves in a ``.pt``.  ``shrinkgpu
    extract`` rebuilds the call from it.  ``extra``: more fields of the record;
    ``more_tensors``: more entries of the ``.pt`` (a compiled module's state dict)."""
    import torch

    encoded_args, encoded_kwargs, meta, tensors = encode_call(args, kwargs)
    try:  # the keywords the call set to other values than their defaults
        nondefault = sorted({a.split("=", 1)[0] for a in _contract(func, args, kwargs)})
    except Exception:
        nondefault = sorted(kwargs)
    record = {
        "op": op_name(func),
        "args": encoded_args,
        "kwargs": encoded_kwargs,
        "nondefault": nondefault,
        "meta": meta,
        **(extra or {}),
    }
    try:
        torch.save({**tensors, **(more_tensors or {})}, path)
    except Exception as exc:  # a tensor subclass torch cannot save: said, not raised
        record["error"] = f"{type(exc).__name__}: {exc}"
    with open(path + ".json", "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def code_literal(value) -> str | None:
    """Python source for a non-tensor argument: plain literals, and torch's dtypes,
    devices, sizes, layouts and memory formats (``torch.float32``)."""
    text = literal(value)
    if text is not None:
        return text
    if isinstance(value, slice):
        parts = [code_literal(v) for v in (value.start, value.stop, value.step)]
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


def safe_op_record(func, args, kwargs) -> dict[str, Any] | None:
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
    tensors, others = _walk_args(args, kwargs)
    return {"name": op_name(func), "tensors": tensors, "others": others, "arguments": _contract(func, args, kwargs)}


def _walk_args(args, kwargs) -> tuple[list[dict[str, Any]], list[str]]:
    """The tensors among a call's arguments (to three levels of lists, tuples and dicts)
    with their metadata, and the other leaves as ``path = repr``."""
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
    return tensors, others


def _module_call(frame):
    """(name, configuration, module, args, kwargs) when ``frame`` is ``nn.Module``'s call
    of a module (its ``__call__``), else None."""
    import torch

    module = frame.f_locals.get("self")
    if frame.f_code.co_name not in ("_wrapped_call_impl", "_call_impl") or not isinstance(module, torch.nn.Module):
        return None
    cls = type(module)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if cls.__module__.startswith("torch.nn.") and getattr(torch.nn, cls.__name__, None) is cls:
        name = f"torch.nn.{cls.__name__}"  # as users write it
    try:
        config = module.extra_repr()
    except Exception:
        config = ""
    return name, config, module, tuple(frame.f_locals.get("args", ())), dict(frame.f_locals.get("kwargs", {}))


# How a module was built, as source (``compiled.module_source``): handed in by the probe's
# run, so that this module never imports the one that imports it.
Describe = Callable[[Any, tuple[str, ...]], "str | None"]


def keep_torch_check(tb, roots: tuple[str, ...], raised: tuple[str, list], describe: Describe) -> None:
    """With ``Watch.keep_raised``: for a module whose own check raised before any
    operator ran, its call saved like an operator's, named as the module is built
    (``torch.nn.LSTM(8, 16, batch_first=True)``), so that the extraction writes
    ``torch.nn.LSTM(8, 16, batch_first=True)(x0, (x1_0, x1_1))``: wherever the user's
    code called it (at the top level, as an attribute of its own module, in a
    ``Sequential``, from a hook), the module whose check raised is the innermost one."""
    try:
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            record = _torch_check_record(tb, roots)
            rest = _torch_frames(tb, roots)
            called = innermost_module_call(rest) if rest else None
            if record is None or called is None or record["name"] != called[0]:
                return
            _keep_module_call(called, roots, raised, describe)
    except Exception:  # an offer: the script's own error must stay what it was
        return


def keep_module_check(tb, roots: tuple[str, ...], raised: tuple[str, list], op: str, call: int | None,
                      describe: Describe) -> None:
    """With ``Watch.keep_raised``: for an error a torch function raised (the call ``op``,
    the ``call``-th, which the mode kept) by a check in torch's Python code (a ``raise``
    or an ``assert``, not an operator's kernel) while a module of torch ran it
    (``MultiheadAttention`` in ``F.multi_head_attention_forward``), that module's call
    saved too, for the extraction to write the module the user built rather than the
    function it calls with its weights."""
    try:
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            rest = _torch_frames(tb, roots, through_probe=True)
            if not rest or _module_call(rest[0]) is None or not _raised_by_a_check(tb):
                return
            _keep_module_call(innermost_module_call(rest), roots, raised, describe, within=[op, call])
    except Exception:  # an offer: the script's own error must stay what it was
        return


def _keep_module_call(called, roots: tuple[str, ...], raised: tuple[str, list], describe: Describe,
                      within=None) -> None:
    """A module's call saved like an operator's, the stand-in named as the module is
    built: the arguments its construction was seen with (``describe``), else its
    ``extra_repr``; ``within``: [the operator, its call number] whose error it is."""
    name, config, module, args, kwargs = called
    if not name.startswith("torch.nn."):
        return  # a class of the user's or of another library: its definition is not at hand
    built = describe(module, roots) or f"{name}({config})" + ("" if module.training else ".eval()")
    head, paren, tail = built.partition("(")
    owner, _, cls = head.rpartition(".")

    def stand_in(*a, **k):  # named as the call the extraction writes
        raise NotImplementedError

    stand_in.__module__, stand_in.__name__, stand_in.__qualname__ = owner, cls, cls + paren + tail
    before = len(raised[1])
    _keep_raised(stand_in, args, kwargs, None, raised)
    if within is not None and len(raised[1]) > before:
        raised[1][-1]["within"] = within


_PROBE = os.path.dirname(os.path.abspath(__file__))  # the probe's own frames


def _torch_frames(tb, roots: tuple[str, ...], through_probe: bool = False) -> list | None:
    """The frames after the user's last one, when every one of them is torch's (the
    probe's own, with ``through_probe``, passed over: its mode calls the torch function
    it saw); else None (raised in the user's code, in another library, or in user code
    torch called back)."""
    import torch

    from shrinkgpu.worker.probe.paths import is_under, is_user_file

    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    users = [i for i, f in enumerate(frames) if is_user_file(f.f_code.co_filename, roots)]
    if not users or users[-1] == len(frames) - 1:
        return None
    rest = frames[users[-1] + 1:]
    if through_probe:
        rest = [f for f in rest if not is_under(os.path.abspath(f.f_code.co_filename), (_PROBE,))]
    home = (os.path.dirname(os.path.abspath(torch.__file__)),)
    if not rest or not all(is_under(os.path.abspath(f.f_code.co_filename), home) for f in rest):
        return None
    return rest



def innermost_module_call(frames: list):
    """``_module_call`` of the innermost module called among ``frames`` (the one whose
    own code raised: an ``LSTM`` in a ``Sequential``), or None."""
    found = None
    for frame in frames:
        called = _module_call(frame)
        if called is not None:
            found = called
    return found


def _raised_by_a_check(tb) -> bool:
    """Whether the innermost frame raised by a statement of torch's Python code (a
    ``raise``, an ``assert``), not by calling an operator that failed."""
    import linecache

    while tb.tb_next is not None:
        tb = tb.tb_next
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip()
    return line.startswith(("raise ", "assert ")) or line == "raise"


def torch_check_record(tb, roots: tuple[str, ...]) -> dict[str, Any] | None:
    """For an error torch's own Python code raised (a module's or a functional's check
    of its inputs, before any operator ran: ``nn.LSTM``'s hidden-size check,
    BatchNorm's one value per channel, ``pack_padded_sequence``'s lengths), the record of
    the torch call the user's code made: the module (with its configuration) and the
    arguments it was called with, or the function and its arguments.  None when the
    error was raised in the user's code or in another library."""
    try:
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            return _torch_check_record(tb, roots)
    except Exception:  # a note must never replace the error it notes
        return None


def _torch_check_record(tb, roots: tuple[str, ...]) -> dict[str, Any] | None:
    import inspect

    rest = _torch_frames(tb, roots)
    if rest is None:
        return None  # raised in the user's code, another library, or user code torch called back
    first = rest[0]
    code = first.f_code
    # A module the user's code called: the one whose own check raised is the innermost
    # (an ``LSTM`` in a ``Sequential``)
    called = innermost_module_call(rest) if _module_call(first) is not None else None
    if called is not None:
        name, config, module, args, kwargs = called
        tensors, others = _walk_args(args, kwargs)
        return {"name": name, "tensors": tensors, "others": others,
                "arguments": [f"{type(module).__name__}({config})"] + ([] if module.training else ["training=False"])}
    func = first.f_globals.get(code.co_name)
    if getattr(func, "__code__", None) is not code:
        func = None
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    values = {n: first.f_locals[n] for n in names if n in first.f_locals}
    module_name = first.f_globals.get("__name__", "torch")
    name = f"{module_name}.{getattr(code, 'co_qualname', code.co_name)}"
    if module_name == "torch.nn.functional":
        name = f"torch.nn.functional.{code.co_name}"
    tensors, others = _walk_args((), values)
    tensors += _loading_into(name, values)
    arguments: list[str] = []
    if func is not None:
        try:
            sig = inspect.signature(func)
            for n, v in values.items():
                param = sig.parameters.get(n)
                if param is not None and not _holds_tensor(v) and not _names_a_file(v) and (
                    param.default is inspect.Parameter.empty or not same_value(v, param.default)
                ):
                    arguments.append(f"{n}={_short_repr(v)}")
        except (TypeError, ValueError):
            pass
    return {"name": name, "tensors": tensors, "others": others, "arguments": arguments}


def _loading_into(name: str, values: dict) -> list[dict[str, Any]]:
    """For ``Module.load_state_dict``, the module's own tensors the state dict's entries
    are copied into: a size mismatch is between the two (``[450, 64]`` from the
    checkpoint, ``[465, 64]`` in the model), and the model's side is the half of the bug
    that ``state_dict``'s tensors alone do not show."""
    import torch

    if not name.endswith("Module.load_state_dict"):
        return []
    module, state = values.get("self"), values.get("state_dict")
    if not isinstance(module, torch.nn.Module) or not isinstance(state, dict):
        return []
    own = module.state_dict()
    return [_tensor_meta(own[key], f"self[{key!r}]") for key in list(state)[:MAX_FLAT_ARGS]
            if key in own and isinstance(own[key], torch.Tensor)]


def _names_a_file(value) -> bool:
    """Whether an argument is a file (an open one, or the path of one): where a loader
    reads its bytes (``torch.load('best.pt')``), which a reduction or an extracted call
    names otherwise; what the file holds is the bug's, not its name."""
    import io

    if isinstance(value, (io.IOBase, os.PathLike)):
        return True
    try:
        return isinstance(value, str) and 0 < len(value) < 4096 and os.path.isfile(value)
    except (OSError, ValueError):
        return False


def _holds_tensor(value, depth: int = 0) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if depth < 3 and isinstance(value, (list, tuple)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    return False


def same_value(value, default) -> bool:
    """Whether an argument is its parameter's default (equal and of its type, or the
    default itself)."""
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
            if param.default is not inspect.Parameter.empty and same_value(value, param.default):
                continue
            items = [(name, value)]
        for key, item in items:
            if not _holds_tensor(item):
                out.append(f"{key}={_short_repr(item)}")
    return out


def _strided():
    import torch

    return torch.strided


def _tensor_meta(t, path: str) -> dict[str, Any]:
    # Metadata only: touching values would synchronise (or fail) on a broken CUDA context.
    try:
        # (a sparse COO tensor answers stride() with zeros: its layout has none)
        stride = list(t.stride()) if t.layout is _strided() else None
    except Exception:  # nested layouts raise
        stride = None
    meta = {
        "path": path,
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "stride": stride,
        "device": str(t.device),
    }
    if t.device.type == "cpu" and (t.dtype.is_floating_point or t.dtype.is_complex):
        # Values, on the CPU only (where reading them neither synchronises nor fails):
        # an inf or a NaN is part of the bug (signature.TensorMeta.finite).
        try:
            import torch

            with torch._C.DisableTorchFunctionSubclass():
                meta["finite"] = bool(torch.isfinite(t.detach()).all())
        except Exception:
            pass
    return meta


def _short_repr(value) -> str:
    if value is None or isinstance(value, (bool, int, float, str, slice, type(Ellipsis))):
        text = repr(value)
    else:
        cls = type(value)
        if (cls.__module__.startswith("torch")
                and cls.__name__ in ("dtype", "device", "Size", "layout", "memory_format")):
            text = str(value)
        else:
            text = f"<{cls.__name__}>"
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 3] + "..."


# What one operator's tensor arguments may record: distinct shapes per argument, and
# operators (the first run calls thousands; only the ones that raised are written).
SHAPES_PER_ARGUMENT = 64
SHAPED_OPERATORS = 4096


class ShapeLog:
    """The shapes each operator's top-level tensor arguments had across a run's calls that
    returned: which dimensions the program itself varies (a sequence a loop grows, a last
    batch), so that they do not identify the bug.  One run only (``Watch.op_shapes``).

    Two rules keep a dimension the bug set from passing for one the program varies.  The
    call that raised is no evidence (its size may be the bug: 16 features where every
    call before had 256).  And calls are told apart by the parameters they were given
    (``F.linear`` of one ``nn.Linear`` is not ``F.linear`` of the next layer, whose input
    is as wide as that layer wants): only the calls with the same parameters as the one
    that raised count, and calls given no parameter form one group."""

    def __init__(self):
        import torch

        self._tensor = torch.Tensor
        self._parameter = torch.nn.Parameter
        # (id(func), ids of its parameters) -> (func, {argument: shapes}); an argument is
        # its position, or its keyword's name (named at ``of``: this runs at every torch
        # call of the run)
        self.by_group: dict[tuple, tuple[Any, dict[int | str, set[tuple[int, ...]]]]] = {}
        # the groups of the calls that raised (normally one: that of the first error; a
        # call the script caught before it adds its own)
        self.raised: set[tuple] = set()

    def before(self, func, args, kwargs):
        """What a call is given, read before it runs (an in-place op may reshape it)."""
        tensor, parameter = self._tensor, self._parameter
        found = []
        params = ()
        for where, value in chain(enumerate(args), kwargs.items() if kwargs else ()):
            if isinstance(value, tensor):
                found.append((where, value.shape))
                if isinstance(value, parameter):
                    params += (id(value),)
        return (id(func), params), func, found

    def returned(self, pending) -> None:
        key, func, found = pending
        entry = self.by_group.get(key)
        if entry is None:
            if len(self.by_group) >= SHAPED_OPERATORS:
                return
            entry = self.by_group[key] = (func, {})
        seen = entry[1]
        for where, shape in found:
            shapes = seen.get(where)
            if shapes is None:
                shapes = seen[where] = set()
            if len(shapes) < SHAPES_PER_ARGUMENT:
                shapes.add(shape)

    def raised_at(self, pending) -> None:
        self.raised.add(pending[0])

    def of(self, names: set[str]) -> dict[str, dict[str, list[list[int]]]]:
        """{operator: {argument: [shape, ...]}} for the operators named: the shapes of the
        calls that returned in the groups of its calls that raised."""
        out: dict[str, dict[str, list[list[int]]]] = {}
        for key, (func, seen) in self.by_group.items():
            name = op_name(func)
            if name not in names or key not in self.raised:
                continue
            merged = out.setdefault(name, {})
            for where_key, shapes in seen.items():
                where = f"args[{where_key}]" if isinstance(where_key, int) else f"kwargs[{where_key!r}]"
                merged[where] = sorted({*map(tuple, merged.get(where, [])), *map(tuple, shapes)})
        return {n: {w: [list(s) for s in shapes] for w, shapes in m.items()} for n, m in out.items()}


# Calls that raise whose arguments one run keeps: the first error is usually the first
# one, but user code may catch a few before it (a probe of a file, a fallback path).
RAISED_KEPT = 4
# Arguments larger than this are not copied at the error (an out-of-memory error's
# tensors fill the device; the copy would take the host's memory and minutes): a capture
# run saves what the extraction needs instead.
RAISED_MAX_BYTES = 2**30


def watch_torch_calls(note: Callable[..., None], capture: Capture | None = None, shapes: ShapeLog | None = None,
                      raised: tuple[str, list] | None = None,
                      output_of: tuple[tuple[str, int], list] | None = None):
    """A ``TorchFunctionMode`` that hands every torch call that raises to ``note`` (with
    which call of that operator it was), saves the arguments of the call ``capture``
    names before it runs, logs every call's shapes in ``shapes``, with ``raised``
    (a directory, and a list for the records) saves the arguments of each call that
    raises as it raised, and with ``output_of`` ((operator, N), a list) summarises what
    the N-th call of that operator returned."""
    from torch.overrides import TorchFunctionMode

    compiling = getattr(getattr(__import__("torch"), "compiler", None), "is_compiling", lambda: False)
    captured = False

    class _WatchTorchCalls(TorchFunctionMode):
        # While this handler runs, torch pops the mode, so nested calls are not seen:
        # what gets recorded is the outermost torch API call, the one the user wrote.
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if compiling():
                # Dynamo traces a torch function mode into the graph it compiles: the
                # probe's bookkeeping must not become part of the user's graph (a graph
                # break of ours under fullgraph, our frames in Inductor's messages).
                return func(*args, **kwargs)
            key = id(func)
            calls[key] = calls.get(key, 0) + 1
            nonlocal captured
            if capture is not None and calls[key] == capture.call and not captured:
                if op_name(func) == capture.op:
                    # Before the call: on a GPU the values cannot be read after a failed kernel.
                    captured = True
                    save_call(func, args, kwargs, capture.path)
            pending = None
            if shapes is not None:
                try:
                    pending = shapes.before(func, args, kwargs)
                except Exception:  # a note must never replace the script's own behaviour
                    pass
            try:
                result = func(*args, **kwargs)
            except Exception as exc:
                if pending is not None:
                    shapes.raised_at(pending)
                note(func, args, kwargs, exc, call=calls[key])
                if raised is not None and len(raised[1]) < RAISED_KEPT:
                    _keep_raised(func, args, kwargs, calls[key], raised)
                raise
            if pending is not None:
                shapes.returned(pending)
            if output_of is not None and calls[key] == output_of[0][1] and not output_of[1]:
                if op_name(func) == output_of[0][0]:
                    output_of[1].append(summary_of(result))
            return result

    calls: dict[int, int] = {}  # the N-th call of each operator: which call failed

    mode = _WatchTorchCalls()
    _compiled_code_outside(mode)
    return mode


def summary_of(value, depth: int = 0) -> str:
    """``float32[4, 3] all finite``: a call's result as the comparisons show it (the
    extracted call prints the same, ``ablation.call``)."""
    try:
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            if isinstance(value, torch.Tensor):
                floating = value.is_floating_point() or value.is_complex()
                finite = "all finite" if not floating or bool(torch.isfinite(value.detach()).all()) else \
                    "not all finite"
                return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)} {finite}"
            if isinstance(value, (tuple, list)) and depth < 2:
                return "(" + ", ".join(summary_of(v, depth + 1) for v in value) + ")"
            return type(value).__name__
    except Exception:  # a note must never change the run
        return type(value).__name__


def _compiled_code_outside(mode) -> None:
    """Call what ``torch.compile`` returns with ``mode`` off the stack.  Dynamo traces
    the torch function modes in force into the graph it compiles, and guards on them:
    with the watch in force, a compiled function met code Dynamo handles otherwise (a
    numpy array in ``2 * u.numpy()`` became ``Tensor.mul`` on an ndarray) and failed
    with an error of ours, not the script's.  Without it, Dynamo compiles and guards
    what the plain run compiles; what fails inside compiled code is named by the
    compile machinery anyway (``compile_wrapper``).  Installed on the first
    ``torch.compile`` call, so a script that never compiles never imports Dynamo."""
    import torch

    real = torch.compile
    if getattr(real, "_shrinkgpu_outside", False):
        return
    try:
        from torch.overrides import _get_current_function_mode_stack, _pop_mode_temporarily
    except ImportError:  # an older torch: the watch stays where it was
        return
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

    def outside(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if compiling():
                return fn(*args, **kwargs)  # traced inside another compiled call: as it is
            stack = _get_current_function_mode_stack()
            if not stack or stack[-1] is not mode:
                return fn(*args, **kwargs)  # a mode of the script's own is on top: leave it
            with _pop_mode_temporarily():
                return fn(*args, **kwargs)

        return call

    def patch() -> None:
        from torch._dynamo import eval_frame

        context = getattr(eval_frame, "OptimizeContext", None)
        original = getattr(context, "__call__", None)  # noqa: B004 - the method, to wrap, not a callable check
        if original is None or getattr(original, "_shrinkgpu_outside", False):
            return

        @functools.wraps(original)
        def wrap(self, fn):
            result = original(self, fn)
            # a compiled module's forward comes through here as a function of its own
            if isinstance(result, torch.nn.Module) or not callable(result) or isinstance(result, type):
                return result
            return outside(result)

        wrap._shrinkgpu_outside = True
        context.__call__ = wrap

    @functools.wraps(real)
    def compile(*args, **kwargs):  # noqa: A001  (as torch names it)
        patch()
        return real(*args, **kwargs)

    compile._shrinkgpu_outside = True
    torch.compile = compile


def _argument_bytes(value, depth: int = 0) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        try:
            return value.numel() * value.element_size()
        except Exception:
            return 0
    if depth < 3 and isinstance(value, (list, tuple)):
        return sum(_argument_bytes(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return sum(_argument_bytes(v, depth + 1) for v in value.values())
    return 0


def _keep_raised(func, args, kwargs, call: int, raised: tuple[str, list]) -> None:
    """The arguments of a call that just raised, saved like a ``capture``.  Most errors are
    raised by the operator's checks before it wrote anything, so its arguments are what it
    was given; an extraction from them is checked like any other.  After a failed GPU
    kernel the values cannot be read: the save says so, and a capture run is needed."""
    directory, records = raised
    path = os.path.join(directory, f"raised-{len(records)}.pt")
    size = _argument_bytes((args, kwargs))
    if size > RAISED_MAX_BYTES:
        records.append({"op": op_name(func), "call": call, "path": None,
                        "error": f"its tensors hold {size / 2**30:.1f} GiB"})
        return
    try:
        os.makedirs(directory, exist_ok=True)
        save_call(func, args, kwargs, path)
        records.append({"op": op_name(func), "call": call, "path": path})
    except Exception as exc:  # an offer: the script's own error must stay what it was
        records.append({"op": op_name(func), "call": call, "path": None, "error": f"{type(exc).__name__}: {exc}"})
