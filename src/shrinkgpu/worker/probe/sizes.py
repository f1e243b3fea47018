"""The sizes the user's failing frames computed from data, read at the first error.

Research code sizes its model from its data: ``max_len = xtr.size(1)``,
``RopeLM(cfg, len(vocab.itos), max_len)``, ``nn.Linear(X.shape[1], 64)``.  While those
expressions stay, so does the pipeline that built ``xtr`` and ``vocab`` (often most of a
run), though the bug needs only the numbers.  A maintainer writes ``33``.  At the first
error each user frame on the stack still holds the objects these expressions read, so
the probe evaluates them there and records their values as literals; the
``observed-sizes`` pass (passes/sizes.py) offers each literal in the expression's place,
and the oracle decides whether the number was all the bug needed.

Besides, a name the scope binds once to something other than a literal (``max_len =
max(len(s) for s in seqs)``, ``n_classes = int(y.max()) + 1``) is recorded with its value in
the frame when that is a whole number: it is read, not evaluated.

Besides, the configuration values the frames read (``cfg.data.n_features``,
``args.lr``, ``vocab.eos``): a number, a flag or None (never a string: a token or a
path read from the environment would be pasted into the result), read through
names and attributes from an ``argparse.Namespace``, a ``SimpleNamespace``, a dataclass
instance or an object of the user's own class that holds no tensor and no module, never
through a property, and never an attribute the scope assigns.  A model is configured by
such values, and a maintainer writes them as numbers; the config loading goes then.

Only size reads are evaluated, never a call the user wrote: ``len(E)``, ``E.size(k)``,
``E.size()``, ``E.shape``, ``E.shape[k]``, ``E.numel()``, ``E.dim()``, ``E.ndim``, where
``E`` is a name followed by attributes and constant subscripts (reading it runs no code of
the user's but a property's).  ``len`` is taken only of a builtin collection, a tensor or
an array, or an object of the user's own class or of torch (a dataset, a loader).
Expressions inside a lambda, a comprehension or a nested definition read names of another
scope and are left.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Any, Iterator

from shrinkgpu.worker.probe.paths import is_user_file
from shrinkgpu.worker.probe.recorder import exception_chain

# One first run's records: a forward with a hundred size reads is no place to look for
# the few that pin a data pipeline, and each evaluation costs the run a little.
SIZES_MAX = 128

_SHAPED = ("size", "numel", "dim")
_COLLECTIONS = (list, tuple, dict, set, frozenset, str, bytes, range)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def observed_sizes(exc: BaseException, roots: tuple[str, ...], rel) -> list[dict[str, Any]]:
    """``[{"file", "function", "expression", "literal"}]`` for the size reads of each user
    frame on the error's stack (``function``: the frame's qualified name, ``<module>`` at
    the top level; ``expression``: as ``ast.unparse`` writes it).  An expression whose
    value differs between two frames of the same function (recursion) is left out."""
    frames = []
    seen: set[int] = set()
    for member in exception_chain(exc):
        tb = member.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if id(frame) not in seen and is_user_file(frame.f_code.co_filename, roots):
                seen.add(id(frame))
                frames.append(frame)
            tb = tb.tb_next
    values: dict[tuple[str, str, str], str | None] = {}
    for frame in frames:
        code = frame.f_code
        scope = frame_statements(frame)
        if scope is None:
            continue
        function = getattr(code, "co_qualname", code.co_name)
        file = rel(code.co_filename)
        found = [(ast.unparse(node), _evaluate(node, frame, roots), "number") for node in _size_reads(scope)]
        found += [(ast.unparse(node), _setting(node, frame, roots), "setting") for node in _setting_reads(scope)]
        locals_ = frame.f_locals
        for name in _computed_names(scope):
            if name in locals_:
                value = locals_[name]
                tensor = tensor_literal(value)
                found.append((name, tensor, "tensor") if tensor is not None else (name, _literal(value), "number"))
        for text, literal, kind in found:
            if len(values) >= SIZES_MAX:
                break
            if literal is None:
                continue
            key = (file, function, text)
            if key in values and values[key] != (literal, kind):
                values[key] = None  # two calls, two values: no literal
            else:
                values.setdefault(key, (literal, kind))
    return [
        {"file": f, "function": fn, "expression": e, "literal": v[0], "kind": v[1]}
        for (f, fn, e), v in values.items() if v is not None
    ]


def frame_statements(frame) -> list[ast.AST] | None:
    """The statements of the function (or module) a frame runs, as its file holds them."""
    tree = parse_source(frame.f_code.co_filename)
    return scope_of(tree, frame.f_code) if tree is not None else None


# Sizes and the data objects both read the failing frames' files, once per run (a forked
# candidate inherits no entry: the cache fills only at a first error).
@lru_cache(maxsize=64)
def parse_source(filename: str) -> ast.Module | None:
    try:
        with open(filename, encoding="utf-8") as fh:
            return ast.parse(fh.read(), filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def scope_of(tree: ast.Module, code) -> list[ast.AST] | None:
    """The statements of the function (or module) a frame runs."""
    if code.co_name == "<module>":
        return list(tree.body)
    line = code.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if line in (first, node.lineno):
                return list(node.body)
    return None


def _size_reads(body: list[ast.AST]) -> Iterator[ast.expr]:
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, ast.expr) and _is_size_read(node):
            yield node
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _setting_reads(body: list[ast.AST]) -> Iterator[ast.Attribute]:
    """The outermost attribute reads ``cfg.data.n_train`` of a name (no call, no
    subscript on the way), neither called (``cfg.build()``) nor assigned anywhere in the
    scope (``args.lr = ...`` would make the value at the failure not the read's)."""
    inner: set[int] = set()
    stored: set[str] = set()
    reads: list[ast.Attribute] = []
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, ast.Call):
            inner.add(id(node.func))
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
            if isinstance(node.ctx, ast.Load):
                reads.append(node)
            else:
                stored.add(ast.unparse(node))
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    for node in reads:
        if id(node) in inner or not _dotted(node):
            continue
        if not any(ast.unparse(node) == t or ast.unparse(node).startswith(t + ".") for t in stored):
            yield node


def _dotted(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _setting(node: ast.Attribute, frame, roots: tuple[str, ...]) -> str | None:
    """The literal of a configuration value (a number, a flag, None) read
    from a configuration object: an ``argparse.Namespace``, a ``SimpleNamespace``, a
    dataclass instance, or an instance of a class of the user's that holds no tensor and
    no module (a vocabulary's ``eos``).  Never a property: reading it would run code."""
    import inspect

    try:
        owner = eval(compile(ast.Expression(node.value), "<setting>", "eval"), frame.f_globals, dict(frame.f_locals))
    except Exception:
        return None
    if not _configuration(owner, roots):
        return None
    try:
        if hasattr(type(inspect.getattr_static(owner, node.attr)), "__get__"):
            return None  # a property, a method: reading it runs code, or is no value
        value = getattr(owner, node.attr)
    except Exception:
        return None
    if type(value) in (bool, type(None)):
        return repr(value)
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        return repr(value) if value == value and abs(value) != float("inf") else None
    # No string: a token, a user name or a path read from the environment or the home
    # directory would be pasted into the result (argparse-values keeps such a read a read).
    return None


def _configuration(owner, roots: tuple[str, ...]) -> bool:
    import argparse
    import dataclasses
    import types

    if isinstance(owner, (argparse.Namespace, types.SimpleNamespace)):
        return True
    if isinstance(owner, type) or isinstance(owner, types.ModuleType):
        return False
    if dataclasses.is_dataclass(owner):
        return True
    if not _sized_object(owner, roots) or (type(owner).__module__ or "").startswith("torch"):
        return False
    try:
        attributes = list(vars(owner).values())[:64]
    except TypeError:
        return False
    return all(_plain_setting(v) for v in attributes)


def _plain_setting(value, depth: int = 0) -> bool:
    if isinstance(value, (bool, int, float, str, bytes, type(None))):
        return True
    if isinstance(value, (list, tuple, set, frozenset)) and depth < 2:
        return all(_plain_setting(v, depth + 1) for v in list(value)[:64])
    if isinstance(value, dict) and depth < 2:
        return all(_plain_setting(k, depth + 1) and _plain_setting(v, depth + 1) for k, v in list(value.items())[:64])
    return False


def _computed_names(body: list[ast.AST]) -> Iterator[str]:
    """Names bound by ``name = <not a literal>`` in the scope (``max_len = max(len(s) for s
    in seqs)``), and by ``for`` targets: their values at the failure are read from the
    frame, not evaluated."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            names = _target_names(targets[0]) if len(targets) == 1 else None
            if names and value is not None and not isinstance(value, ast.Constant) and _index(value) is None:
                yield from names
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)):
            # the failing iteration's item: ``for xb, yb in loader`` becomes ``xb, yb =
            # next(iter(loader))`` (loop-to-first-iteration), then these values
            yield from _target_names(node.target) or ()
        if isinstance(node, ast.stmt):
            stack.extend(reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]))


def _target_names(target: ast.expr) -> list[str] | None:
    """``x`` -> [x]; ``step, (x, y)`` -> [step, x, y]; None for anything else (an
    attribute, a starred name)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        out: list[str] = []
        for element in target.elts:
            inner = _target_names(element)
            if inner is None:
                return None
            out += inner
        return out
    return None


# A tensor larger than this is no value to draw again in every candidate (64 MiB of
# float32); the pipeline that built it stays.
TENSOR_MAX_ELEMENTS = 2**24


def tensor_literal(value: Any) -> str | None:
    """Source text that makes a tensor of ``value``'s dtype, shape, strides and device
    (``torch.randn(64, 4, 128)``, ``torch.zeros(64, dtype=torch.int64)``,
    ``torch.randn(96, 32).t()``); None for anything else: not a plain strided tensor (a
    parameter is the model's), too large, or a layout no permutation of a contiguous
    tensor has (a slice with gaps)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or type(value) is not torch.Tensor or value.layout != torch.strided:
        return None
    if value.numel() > TENSOR_MAX_ELEMENTS or value.is_quantized or value.is_nested:
        return None
    shape, strides = tuple(value.shape), tuple(value.stride())
    order = list(range(len(shape)))
    if not value.is_contiguous():
        # The layout of a transpose or permute: the dimensions by decreasing stride are a
        # contiguous tensor's.
        order = sorted(order, key=lambda d: (-strides[d], d))
        expected, size = {}, 1
        for d in reversed(order):
            expected[d] = size
            size *= shape[d]
        if any(shape[d] != 1 and strides[d] != expected[d] for d in order):
            return None
    dims = [shape[d] for d in order]
    dtype = str(value.dtype)
    options = []
    if value.is_floating_point() or value.is_complex():
        factory = "torch.randn"
        if value.dtype != torch.get_default_dtype():
            options.append(f"dtype={dtype}")
    else:
        factory = "torch.zeros"
        options.append(f"dtype={dtype}")
    if value.device.type != "cpu":
        options.append(f"device={str(value.device)!r}")
    if value.requires_grad:
        options.append("requires_grad=True")
    sizes = ", ".join(map(str, dims)) if dims else "()"
    text = f"{factory}({', '.join([sizes, *options])})"
    if order != sorted(order):
        inverse = [order.index(d) for d in range(len(order))]
        text += ".t()" if len(order) == 2 else f".permute({', '.join(map(str, inverse))})"
    return text


def _is_size_read(node: ast.expr) -> bool:
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "len" and len(node.args) == 1:
            return _path(node.args[0])
        if isinstance(func, ast.Attribute) and func.attr in _SHAPED and _path(func.value):
            if func.attr == "size":
                return not node.args or (len(node.args) == 1 and _index(node.args[0]) is not None)
            return not node.args
        return False
    if isinstance(node, ast.Attribute):
        return node.attr in ("shape", "ndim") and _path(node.value)
    if isinstance(node, ast.Subscript) and _index(node.slice) is not None:
        inner = node.value
        if isinstance(inner, ast.Attribute) and inner.attr == "shape":
            return _path(inner.value)
        if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "size"
                and not inner.args and not inner.keywords):
            return _path(inner.func.value)
    return False


def _path(node: ast.expr) -> bool:
    """``x``, ``self.data.x``, ``batch["x"]``, ``xs[0]``: reads, no calls."""
    while True:
        if isinstance(node, ast.Name):
            return True
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(
            node.slice.value, (int, str)
        ):
            node = node.value
        else:
            return False


def _index(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int):
        return -node.operand.value
    return None


def _base(node: ast.expr) -> ast.expr:
    """The object whose size ``node`` reads."""
    if isinstance(node, ast.Call):
        return node.args[0] if isinstance(node.func, ast.Name) else node.func.value  # type: ignore[union-attr]
    if isinstance(node, ast.Attribute):
        return node.value
    inner = node.value  # type: ignore[attr-defined]
    return inner.value if isinstance(inner, ast.Attribute) else inner.func.value


def _evaluate(node: ast.expr, frame, roots: tuple[str, ...]) -> str | None:
    base = _base(node)
    try:
        value = eval(compile(ast.Expression(base), "<size>", "eval"), frame.f_globals, dict(frame.f_locals))
    except Exception:  # unbound at the failure, a property that raised: no literal
        return None
    shaped = hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type)
    try:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # len(E)
            if not (shaped or isinstance(value, _COLLECTIONS) or _sized_object(value, roots)):
                return None
            result: Any = len(value)
        elif not shaped:
            return None
        elif isinstance(node, ast.Call):
            attr = node.func.attr  # type: ignore[union-attr]
            if attr == "size" and node.args:
                result = value.shape[_index(node.args[0])]
            elif attr == "size":
                result = tuple(value.shape)
            elif attr == "numel":
                result = value.numel() if hasattr(value, "numel") else value.size
            else:
                result = value.ndim
        elif isinstance(node, ast.Attribute):
            result = tuple(value.shape) if node.attr == "shape" else value.ndim
        else:
            result = value.shape[_index(node.slice)]  # type: ignore[attr-defined]
    except Exception:
        return None
    return _literal(result)


def _sized_object(value, roots: tuple[str, ...]) -> bool:
    """A dataset, a vocabulary, a loader: the user's own class, or torch's."""
    module = type(value).__module__ or ""
    if module == "torch" or module.startswith("torch."):
        return True
    import sys

    path = getattr(sys.modules.get(module), "__file__", None)
    return bool(path) and is_user_file(os.fspath(path), roots)


def _literal(value: Any) -> str | None:
    try:
        if isinstance(value, tuple):
            items = [int(v) for v in value if type(v) is int or type(v).__module__ == "numpy"]
            if len(items) != len(value):
                return None
            return "(" + ", ".join(map(str, items)) + ("," if len(items) == 1 else "") + ")"
        if isinstance(value, bool):
            return None
        if type(value) is not int:
            # a numpy integer is a number; a 0-d tensor has ``__index__`` too, but is no int
            # (``n.item()``, ``n.to(device)`` would fail on one)
            if type(value).__module__ != "numpy" or not hasattr(value, "__index__"):
                return None
            value = int(value)
        return str(value) if value >= 0 else None
    except (TypeError, ValueError):
        return None
