"""Changes of the extracted call, one at a time: its values, layout, precision, size and device.

The extracted call (``extract``) is the failing operator alone with its arguments built
from the recorded metadata, one variable per tensor argument; each change here adds
lines that rebind some of those variables just before the call, and nothing else, so
that the edit the report shows is the whole difference:

- **data**: the offending values made valid: an index or class target clamped into the
  range of the dimension it indexes (``target = target.clamp(0, 3)`` for four classes), a
  probability into [0, 1], NaN and inf replaced (``torch.nan_to_num``).  It tells invalid
  data from a broken operator.  For a loss's class targets, also the offending ones set to
  the call's ``ignore_index`` (-100 unless the call names one): what a script that should
  skip unlabelled rows does;
- **layout**: every strided input that is not contiguous made so, and for ``view`` the
  ``reshape`` its error suggests;
- **precision**: the floating-point inputs in float32, and, when they mix dtypes, in one
  dtype (the first input's);
- **size**: the batch dimension cut to 1, and to a power of two;
- **device**: the CPU for a call on a GPU, a GPU for a call on the CPU when one is there.

Each changed call also prints a summary of its result (shape, dtype, whether all
finite), so that a change that "passes" by returning NaN is seen.  Pure text in, texts
out: nothing here runs.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from shrinkgpu.ablation.changes import CALL, DATA, DEVICE, LAYOUT, OUTPUT_MARK, PRECISION, SIZE, Change
from shrinkgpu.signature import contiguous_strides

__all__ = ["Argument", "call_changes", "with_edit"]

# (where, variable name, metadata) of one tensor argument, as extract.Extraction keeps it
Argument = tuple[str, str, Mapping]

INDEX_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "long", "int")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64", "half", "double", "float")
# operator -> where its index sits and the dimension of which argument it indexes
# (position of the indexed tensor, its dimension; None: read ``dim`` from the call)
_INDEXES = {
    "cross_entropy": ((1, "target"), (0, "input"), 1),
    "nll_loss": ((1, "target"), (0, "input"), 1),
    "embedding": ((0, "input"), (1, "weight"), 0),
    "gather": ((2, "index"), (0, "input"), None),
    "index_select": ((2, "index"), (0, "input"), None),
    "scatter": ((2, "index"), (0, "input"), None),
    "scatter_add": ((2, "index"), (0, "input"), None),
    "index_add": ((2, "index"), (0, "input"), None),
    "take_along_dim": ((1, "indices"), (0, "input"), None),
}
_PROBABILITIES = {"binary_cross_entropy": (0, 1), "multinomial": (0,), "bernoulli": (0,)}
_SUMMARY = f'''

def _shrinkgpu_summary(value):
    if isinstance(value, torch.Tensor):
        floating = value.is_floating_point() or value.is_complex()
        finite = "all finite" if not floating or bool(torch.isfinite(value).all()) else "not all finite"
        return f"{{str(value.dtype).removeprefix('torch.')}}{{list(value.shape)}} {{finite}}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_shrinkgpu_summary(v) for v in value) + ")"
    return type(value).__name__


print({OUTPUT_MARK!r} + _shrinkgpu_summary(out))
'''


def _short(op: str) -> str:
    return op.rsplit(".", 1)[-1]


def _dtype(meta: Mapping) -> str:
    return str(meta.get("dtype", "")).removeprefix("torch.")


def _is_index(meta: Mapping) -> bool:
    return _dtype(meta) in INDEX_DTYPES


def _is_float(meta: Mapping) -> bool:
    return _dtype(meta) in FLOAT_DTYPES


def _split(text: str) -> tuple[list[str], str]:
    """The script's lines before the call, and the call (its last statement)."""
    lines = text.rstrip("\n").splitlines()
    return lines[:-1], lines[-1]


def with_edit(text: str, lines: Sequence[str], call: str | None = None, data: str | None = None,
              summary: bool = True) -> str:
    """``text`` (an extracted call) with ``lines`` just before its call (and the call
    rewritten to ``call``); with ``summary``, the call's result printed after it; with
    ``data``, its tensors loaded from that path (so that it runs in any directory)."""
    head, last = _split(text)
    last = call or last
    if data is not None:
        head = [re.sub(r"torch\.load\((['\"]).*?\1\)", f"torch.load({data!r})", ln) for ln in head]
    body = head + list(lines)
    if summary:
        return "\n".join(body + [f"out = {last}"]) + _SUMMARY
    return "\n".join(body + [last]) + "\n"


def _named(arguments: Sequence[Argument], where: tuple[int, str]) -> Argument | None:
    position, keyword = where
    for arg in arguments:
        if arg[0] in (f"args[{position}]", f"kwargs[{keyword!r}]"):
            return arg
    return None


def _dim(call: str, default: int | None) -> int | None:
    """The ``dim`` of an indexing call, read from its text (``x.gather(1, idx)``)."""
    if default is not None:
        return default
    inner = call[call.find("(") + 1:]
    found = re.search(r"\bdim=(-?\d+)", inner) or re.match(r"\s*[A-Za-z_]\w*\s*,\s*(-?\d+)\s*,", inner) \
        or re.match(r"\s*(-?\d+)\s*,", inner)
    return int(found.group(1)) if found else None


def _index_bound(op: str, arguments: Sequence[Argument], call: str, index: Argument) -> int | None:
    """How many entries ``index`` may address: the size of the dimension it indexes, or,
    for an operator we do not know, the smallest dimension of the other tensors (a range
    valid for whichever one it indexes)."""
    known = _INDEXES.get(_short(op))
    if known is not None:
        _at, indexed_where, dim = known
        indexed = _named(arguments, indexed_where)
        if _short(op) == "embedding" and indexed is None:
            indexed = next((a for a in arguments if _is_float(a[2])), None)
        if indexed is None:
            return None
        shape = list(indexed[2].get("shape") or [])
        if _short(op) in ("cross_entropy", "nll_loss") and len(shape) == 1:
            dim = 0
        dim = _dim(call, dim)
        if dim is None or not shape or not -len(shape) <= dim < len(shape):
            return None
        return shape[dim]
    sizes = [s for a in arguments if a is not index for s in (a[2].get("shape") or []) if s > 0]
    return min(sizes) if sizes else None


def _data(op: str, arguments: Sequence[Argument], call: str) -> list[str]:
    lines: list[str] = []
    known = _INDEXES.get(_short(op))
    indexes = [a for a in arguments if _is_index(a[2])]
    if known is not None:
        at = _named(arguments, known[0])
        indexes = [at] if at is not None and _is_index(at[2]) else [a for a in indexes if a[2].get("shape")]
    for index in indexes:
        bound = _index_bound(op, arguments, call, index)
        if not bound:
            continue
        values = index[2].get("values")
        if values is not None and all(0 <= v < bound for v in _flat(values)):
            continue  # every value is valid already
        lines.append(f"{index[1]} = {index[1]}.clamp(0, {bound - 1})")
    probabilities = _PROBABILITIES.get(_short(op), ())
    for arg in arguments:
        if not _is_float(arg[2]):
            continue
        if arg[0] in {f"args[{p}]" for p in probabilities}:
            lines.append(f"{arg[1]} = {arg[1]}.nan_to_num(0.5).clamp(0, 1)")
        elif arg[2].get("nonfinite"):
            lines.append(f"{arg[1]} = torch.nan_to_num({arg[1]})")
    return lines


def _ignored(op: str, arguments: Sequence[Argument], call: str) -> list[str]:
    """A loss's out-of-range class targets set to its ``ignore_index``, the value the loss
    skips: the other way a user makes such targets valid."""
    if _short(op) not in ("cross_entropy", "nll_loss"):
        return []
    target = _named(arguments, _INDEXES[_short(op)][0])
    if target is None or not _is_index(target[2]):
        return []
    bound = _index_bound(op, arguments, call, target)
    values = target[2].get("values")
    if not bound or values is not None and all(0 <= v < bound for v in _flat(values)):
        return []
    given = re.search(r"\bignore_index\s*=\s*(-?\d+)", call)
    ignore = int(given.group(1)) if given else -100
    name = target[1]
    return [f"{name} = {name}.masked_fill(({name} < 0) | ({name} >= {bound}), {ignore})"]


def _flat(values) -> list:
    if isinstance(values, (list, tuple)):
        return [v for item in values for v in _flat(item)]
    return [values] if isinstance(values, (int, float)) and not isinstance(values, bool) else []


def call_changes(text: str, op: str, arguments: Sequence[Argument], *, script: str = "call.py",
                 data: str | None = None, gpu_visible: bool = False) -> list[Change]:
    """The changes that apply to an extracted call of ``op`` (``text``), each a new text
    of ``script`` that prints its result; ``data``: the absolute path of the tensors it
    loads."""
    _head, call = _split(text)
    changes: list[Change] = []
    def add(label: str, what: str, category: str, lines: list[str], new_call: str | None = None) -> None:
        if not lines and new_call is None:
            return
        edit = "\n".join([f"+ {ln}" for ln in lines] + ([f"- {call}", f"+ {new_call}"] if new_call else []))
        if any(c.edit == edit for c in changes):
            return
        files = {script: with_edit(text, lines, new_call, data)}
        changes.append(Change(label, what, files, category, CALL, edit))

    lines = _data(op, arguments, call)
    add("valid values", "the offending values made valid: invalid data, or an operator that refuses valid ones",
        DATA, lines)
    add("ignored targets", "the out-of-range class targets set to the loss's ignore_index, which it skips", DATA,
        _ignored(op, arguments, call))

    strided = [a for a in arguments if a[2].get("stride") is not None and a[2].get("shape") is not None]
    loose = [a for a in strided if list(a[2]["stride"]) != contiguous_strides(a[2]["shape"])]
    add("contiguous inputs", "the same values in contiguous memory: whether the strides are the trigger", LAYOUT,
        [f"{a[1]} = {a[1]}.contiguous()" for a in loose])
    if op == "Tensor.view" and ".view(" in call:
        add("reshape for view", "what the error suggests: reshape copies when the strides do not allow a view",
            LAYOUT, [], call.replace(".view(", ".reshape(", 1))

    floats = [a for a in arguments if _is_float(a[2])]
    kinds = [_dtype(a[2]) for a in floats]
    if len(set(kinds)) > 1:
        first = kinds[0]
        add(f"one dtype ({first})", "every floating-point input in the first one's dtype: inputs of mixed dtypes",
            PRECISION, [f"{a[1]} = {a[1]}.to(torch.{first})" for a, k in zip(floats, kinds) if k != first])
    if any(k != "float32" for k in kinds):
        add("float32", "the usual precision for every floating-point input: the kernel for the other dtype",
            PRECISION, [f"{a[1]} = {a[1]}.float()" for a, k in zip(floats, kinds) if k != "float32"])

    shaped = [a for a in arguments if a[2].get("shape")]
    # A sparse or nested tensor has no strides to slice by (``x0[:1]`` of a sparse COO
    # tensor fails in ``as_strided``): its rows are not a batch to cut.
    if shaped and all(a[2].get("stride") is not None for a in shaped):
        batch = shaped[0][2]["shape"][0]
        batched = [a for a in shaped if a[2]["shape"][0] == batch]
        if batch > 1:
            add("batch 1", "the batch dimension cut to one row (the offending row may be cut with it)", SIZE,
                [f"{a[1]} = {a[1]}[:1]" for a in batched])
            power = 1 << (batch.bit_length() - 1)
            if power != batch and power > 1:
                add(f"batch {power}", "the batch dimension cut to a power of two: length-dependent kernels", SIZE,
                    [f"{a[1]} = {a[1]}[:{power}]" for a in batched])

    on_gpu = [a for a in arguments if str(a[2].get("device", "cpu")).startswith(("cuda", "hip"))]
    if on_gpu:
        add("on the CPU", "the same call on the CPU: a hint about the GPU kernel, not CUDA evidence", DEVICE,
            [f"{a[1]} = {a[1]}.cpu()" for a in on_gpu])
    elif gpu_visible and arguments:
        add("on a GPU", "the same call on a GPU: the CPU kernel against the GPU's", DEVICE,
            [f"{a[1]} = {a[1]}.cuda()" for a in arguments])
    return changes
