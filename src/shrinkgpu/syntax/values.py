"""Source text for the values a run recorded (``probe.ops.encode_call``): a tensor as a
literal of its values, or drawn afresh with its layout, and the structures around
tensors (lists, tuples, dicts, literals, modules as they were built).  One writer for
every script shrinkgpu writes from recorded values: the extracted call, the library's
call written into the program, a loaded call written back as source.

Two levels:

- ``exact``: every tensor as the literal of its values (``torch.tensor([1, 9, 3])``), so
  the text means what the run had; a tensor whose values were not recorded (too many)
  and a module (its weights) have none.
- ``layout``: floating-point tensors drawn afresh, of their dtype, shape, strides and
  device (``torch.randn(32, 4)``), integer and bool tensors as their literal when small,
  else zeros of their layout; modules built as they were built.  The values are gone:
  whether the bug needs them is for a run to say.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import libcst as cst

from shrinkgpu.signature import contiguous_strides
from shrinkgpu.syntax.code import parse_expression

__all__ = ["EXACT", "LAYOUT", "is_floating", "numbers_literal", "tensor_source",
           "value_source", "write_back"]

EXACT = "exact"
LAYOUT = "layout"


def is_floating(meta: dict) -> bool:
    dtype = meta.get("dtype", "")
    return dtype.startswith(("float", "bfloat", "complex")) or dtype in ("half", "double")


def numbers_literal(values: Any) -> str:
    """A nested list of numbers as source, non-finite floats as ``float('nan')``."""
    if isinstance(values, (list, tuple)):
        return "[" + ", ".join(numbers_literal(v) for v in values) + "]"
    if isinstance(values, float) and not math.isfinite(values):
        return f"float({str(values)!r})"
    return repr(values)


def _plain(meta: dict) -> bool:
    """Contiguous from the start of its storage: what ``torch.tensor``, ``torch.randn``
    and ``torch.zeros`` make."""
    return meta.get("stride") is not None and list(meta["stride"]) == contiguous_strides(meta["shape"]) \
        and not meta.get("offset")


def _finish(expr: str, meta: dict, torch: str) -> str:
    if meta.get("device", "cpu") != "cpu":
        expr = f"{expr}.to({meta['device']!r})"
    if meta.get("requires_grad"):
        expr = f"{expr}.requires_grad_()"
    return expr


def tensor_source(meta: dict, level: str = EXACT, torch: str = "torch") -> str | None:
    """A tensor recorded as ``meta`` as source at ``level``; None when there is none (its
    values were not recorded and the level needs them; a layout a literal cannot have).
    ``torch``: the name the script has for torch."""
    if meta.get("stride") is None:
        return None  # sparse, nested: no plain constructor
    floating = is_floating(meta)
    dtype = meta["dtype"]
    if dtype.startswith("complex") or dtype.startswith("qu") or dtype.startswith("qi"):
        return None
    # (float32 is the default dtype: said only when it is another)
    dtype_arg = "" if floating and dtype == "float32" else f", dtype={torch}.{dtype}"
    if "values" in meta and (level == EXACT or not floating or meta.get("nonfinite")):
        if not _plain(meta):
            return None
        return _finish(f"{torch}.tensor({numbers_literal(meta['values'])}{dtype_arg})", meta, torch)
    if level == EXACT:
        return None
    shape = ", ".join(str(s) for s in meta["shape"]) or "()"
    factory = "randn" if floating else "zeros"
    if not _plain(meta):
        # a view of a larger storage: drawn as the storage, seen through the same strides
        extent = meta.get("offset", 0) + 1 + sum((s - 1) * st for s, st in zip(meta["shape"], meta["stride"])) \
            if meta["shape"] and 0 not in meta["shape"] else meta.get("offset", 0) + 1
        return _finish(f"{torch}.{factory}({extent}{dtype_arg}).as_strided({tuple(meta['shape'])!r}, "
                       f"{tuple(meta['stride'])!r}, {meta.get('offset', 0)})", meta, torch)
    return _finish(f"{torch}.{factory}({shape}{dtype_arg})", meta, torch)


def value_source(node: dict, tensor: Callable[[str], str | None], level: str = EXACT) -> str | None:
    """An encoded value as source: ``tensor(where)`` writes each tensor (its literal, or
    the name a script gave it); None when a part has no source at ``level`` (an object
    of no known form; a module, whose weights the exact level would need)."""
    if "t" in node:
        return tensor(node["t"])
    if "lit" in node:
        return node["lit"]
    if "module" in node:
        return node["module"] if level == LAYOUT else None
    if "seq" in node:
        items = [value_source(n, tensor, level) for n in node["seq"]]
        if any(i is None for i in items):
            return None
        if node.get("tuple"):
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # type: ignore[arg-type]
        return f"[{', '.join(items)}]"  # type: ignore[arg-type]
    if "map" in node:
        entries = {k: value_source(v, tensor, level) for k, v in node["map"].items()}
        if any(i is None for i in entries.values()):
            return None
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in entries.items()) + "}"
    return None


def write_back(text: str, file_name: str, args, keywords, attributes) -> str | None:
    """``text`` with every load of the call saved in ``file_name`` written as source:
    ``f(*_call['args'], **_call['kwargs'])`` (or the load inlined into the call, as the
    passes leave it) becomes ``f(a0, a1, k=v)``, ``_call['attributes']['w']`` its
    attribute's text, and the ``_call = torch.load(...)`` line goes.  ``args``: the
    positional arguments' texts; ``keywords``, ``attributes``: (name, text).  None when a
    use of the file is left that this cannot write (the script then still loads it)."""

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    writer = _WriteBack(file_name, [parse_expression(a) for a in args],
                        [(k, parse_expression(v)) for k, v in keywords],
                        {k: parse_expression(v) for k, v in attributes})
    try:
        out = module.visit(writer).code
    except _CannotWrite:
        return None
    if repr(file_name)[1:-1] in out:
        return None
    # ``import pathlib`` was for the load alone when nothing else names it
    rest = "\n".join(ln for ln in out.splitlines() if ln.strip() != "import pathlib")
    if not re.search(r"\bpathlib\b", rest):
        out = "".join(ln for ln in out.splitlines(keepends=True) if ln.strip() != "import pathlib")
    return out


class _CannotWrite(Exception):
    pass


def _key(node) -> str | None:

    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value if isinstance(value.evaluated_value, str) else None
    return None


class _WriteBack(cst.CSTTransformer):
    """The transformer of ``write_back``: what loads the file, the names bound to it, and
    each subscript of either replaced."""

    def __init__(self, file_name: str, args, keywords, attributes):
        super().__init__()
        self.file_name = file_name
        self.args, self.keywords, self.attributes = args, keywords, attributes
        self.bound: set[str] = set()

    def _loads(self, node) -> bool:
        import libcst as cst

        if isinstance(node, cst.Name):
            return node.value in self.bound
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        called = (func.attr.value if isinstance(func, cst.Attribute) else
                  func.value if isinstance(func, cst.Name) else "")
        return called == "load" and _mentions(node, self.file_name)

    def _part(self, node) -> str | None:
        """'args', 'kwargs' or 'attributes:<name>' for a subscript of the load."""
        key = _key(node)
        if key in ("args", "kwargs") and self._loads(node.value):
            return key
        if key is None:
            return None
        inner = node.value
        if _key(inner) == "attributes" and self._loads(inner.value):
            return f"attributes:{key}"
        return None

    def visit_Assign(self, node) -> bool:
        import libcst as cst

        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and self._loads(node.value):
            self.bound.add(node.targets[0].target.value)
        return True

    def leave_SimpleStatementLine(self, original, updated):
        import libcst as cst

        body = [s for s in updated.body if not (isinstance(s, cst.Assign) and len(s.targets) == 1
                                                and isinstance(s.targets[0].target, cst.Name)
                                                and s.targets[0].target.value in self.bound and self._loads(s.value))]
        if len(body) == len(updated.body):
            return updated
        return cst.RemoveFromParent() if not body else updated.with_changes(body=body)

    def leave_Call(self, original, updated):
        import libcst as cst

        new_args = []
        changed = False
        # (read on the original: the subscripts below are written as a list and a dict already)
        for was, arg in zip(original.args, updated.args):
            part = self._part(was.value) if isinstance(was.value, cst.Subscript) else None
            if arg.star == "*" and part == "args":
                new_args += [cst.Arg(value=a) for a in self.args]
                changed = True
            elif arg.star == "**" and part == "kwargs":
                new_args += [cst.Arg(value=v, keyword=cst.Name(k), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
                    for k, v in self.keywords]
                changed = True
            else:
                new_args.append(arg)
        if not changed:
            return updated
        # commas as a fresh argument list writes them
        new_args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in new_args]
        return updated.with_changes(args=new_args)

    def leave_Subscript(self, original, updated):
        import libcst as cst

        part = self._part(original)
        if part is None:
            return updated
        if part == "args":
            return cst.List([cst.Element(a) for a in self.args])
        if part == "kwargs":
            return cst.Dict([cst.DictElement(cst.SimpleString(repr(k)), v) for k, v in self.keywords])
        name = part.split(":", 1)[1]
        if name not in self.attributes:
            raise _CannotWrite(name)
        return self.attributes[name]


def _mentions(node, file_name: str) -> bool:

    found = []

    class Find(cst.CSTVisitor):
        def visit_SimpleString(self, s) -> None:
            if s.evaluated_value == file_name:
                found.append(s)

    node.visit(Find())
    return bool(found)
