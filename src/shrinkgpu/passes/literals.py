"""Data written as literals, shrunk: the records of a batch dropped, the numbers zeroed.

A start that calls the library's callee directly writes the call's arguments as source
(``collate([{"input_ids": [2, 1638, ...], "labels": [-100, 0, ...]}, ... 32 records])``),
and an issue's paste often carries the tensor that failed as a nested list.  No other
pass looks inside such a literal, so thousands of tokens of data outlive every
statement around them.  A maintainer keeps the one record that fails and writes the
values that do not matter as ``[0] * 80``.

Level 0 offers the elements of a list or tuple of data in at most ``CHUNKS`` runs, each
a unit; level 1, in a list that is short by then (``MAX_SINGLES``), each element alone
(the core finds the few records the failure needs: a batch dimension the program varies
is free in the signature, a fixed one keeps every record, and the runs cap what finding
that out costs at about twice their number of tests); level 2 writes each list of
numbers as the same count of zeros, which keeps every length and so every shape.  A value the bug
needs (an index out of range, a NaN) makes the candidate fail otherwise, and the oracle
rejects it.  Only the outermost list of data is split into units: the elements of the
records inside it would multiply the units by their length, and removing one of them
changes a shape that the strict signature keeps anyway.

Only literals of ``MIN_TOKENS`` or more are data to this pass.  A script's own constants
(``KEYWORDS = ['yes', 'no', ...]``, a list of city names, the feature columns) are a few
dozen tokens: a maintainer reads them as written, and the pass runs in the first tier,
so every test spent on them comes before the statement deletions that shrink such a
script (at a test budget, five corpus results grew by it).  What the pass is for is
hundreds to thousands of tokens: a batch a cut writes, a tensor pasted from an issue.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, dedupe
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.tokens import count_tokens

# A list of records (dicts, lists, tuples) is split from this many elements, a list of
# strings (sentences, file names) from MIN_VALUES, and a list of numbers only zeroed:
# its length is a shape, kept by the strict signature in all but a batch dimension, and
# splitting one of every paste's tensors would cost tests that rarely pay.  Below these,
# a literal is configuration (``milestones=[30, 60]``) a maintainer reads as written.
MIN_RECORDS = 4
MIN_VALUES = 8
# Units per list at level 0; lists up to MAX_SINGLES long are split element by element
# at level 1.
CHUNKS = 8
MAX_SINGLES = 16
# The size from which a literal is data and not one of the script's constants; the lists
# of numbers inside one are zeroed however short each is (a pasted tensor's rows).
MIN_TOKENS = 100
# How deep a literal counts as data: a record of lists of numbers is two levels below
# the batch.
_DEPTH = 4


def _value(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    return (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus))
            and isinstance(node.expression, (cst.Integer, cst.Float)))


def _data(node: cst.BaseExpression, depth: int = _DEPTH) -> bool:
    """Whether ``node`` is a value or a display of data (nothing it holds runs code)."""
    if _value(node):
        return True
    if depth <= 0:
        return False
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return all(isinstance(e, cst.Element) and _data(e.value, depth - 1) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and _value(e.key) and _data(e.value, depth - 1)
                   for e in node.elements)
    return False


def _record(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.List, cst.Tuple, cst.Set, cst.Dict))


def _zeros(node: cst.BaseExpression) -> str | None:
    """``[3, -1, 7, ...]`` -> ``[0] * n`` (``0.0`` when one is a float, ``False`` when all
    are bools; a tuple as ``(0,) * n``); None for anything else."""
    if not isinstance(node, (cst.List, cst.Tuple)) or len(node.elements) < MIN_VALUES:
        return None
    kinds = set()
    for e in node.elements:
        v = e.value if isinstance(e, cst.Element) else None
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, (cst.Minus, cst.Plus)):
            v = v.expression
        if isinstance(v, cst.Integer):
            kinds.add("int")
        elif isinstance(v, cst.Float):
            kinds.add("float")
        elif isinstance(v, cst.Name) and v.value in ("True", "False"):
            kinds.add("bool")
        else:
            return None
    zero = "False" if kinds == {"bool"} else "0.0" if "float" in kinds and "bool" not in kinds else "0"
    if "bool" in kinds and len(kinds) > 1:
        return None
    n = len(node.elements)
    return f"[{zero}] * {n}" if isinstance(node, cst.List) else f"({zero},) * {n}"


class _Literals(cst.CSTVisitor):
    """The outermost lists or tuples of data long enough to split, and every list of
    numbers long enough to zero."""

    def __init__(self, min_tokens: int):
        self.split: list[cst.List | cst.Tuple] = []
        self.zero: list[tuple[cst.BaseExpression, str]] = []
        self._inside = 0
        self._min_tokens = min_tokens
        self._outer: cst.BaseExpression | None = None  # the data literal being walked

    def visit_List(self, node) -> bool:
        return self._visit(node)

    def leave_List(self, node) -> None:
        self._leave(node)

    def visit_Tuple(self, node) -> bool:
        return self._visit(node)

    def leave_Tuple(self, node) -> None:
        self._leave(node)

    def _visit(self, node) -> bool:
        # Everything inside a data literal is data: only the outermost one is checked.
        if self._outer is None:
            if not _data(node):
                return True  # code around data (``[torch.tensor([...]), n]``): look inside
            if self._min_tokens and count_tokens(cst.Module([]).code_for_node(node)) < self._min_tokens:
                return False  # one of the script's constants, with all it holds
            self._outer = node
        text = _zeros(node)
        if text is not None and not all(isinstance(e.value, cst.Integer) and e.value.value == "0"
                                        for e in node.elements):
            self.zero.append((node, text))
        # ``x = 1, 2, 3`` emptied would not parse: only a tuple in parentheses
        if self._inside or (isinstance(node, cst.Tuple) and not node.lpar):
            return True
        values = [e.value for e in node.elements]
        if ((len(values) >= MIN_RECORDS and all(_record(v) for v in values))
                or (len(values) >= MIN_VALUES and all(isinstance(v, cst.SimpleString) for v in values))):
            self.split.append(node)
            self._inside += 1
        return True

    def _leave(self, node) -> None:
        if self.split and self.split[-1] is node:
            self._inside -= 1
        if self._outer is node:
            self._outer = None

    # What a nested definition holds is another statement's.
    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False


class ShrinkDataLiterals(EditPass):
    """``collate([{...}, {...}, ... 32 records])`` -> ``collate([{...}])``; ``[2, 1638,
    504, ...]`` -> ``[0] * 25``."""

    name = "data-literals"
    # Units name original nodes: a candidate that already rewrote an expression holds
    # other ones.
    needs_rebased = True

    def __init__(self, min_tokens: int = MIN_TOKENS):
        super().__init__()
        self.min_tokens = min_tokens

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level > 2:
            return None
        if self.waits(cand):
            return []
        program = cand.program
        out: list[Unit] = []
        for s in cand.editable():
            if s.kind != "simple":
                continue
            found = _Literals(self.min_tokens)
            s.node.visit(found)
            if level == 2:
                out += [(Edit("expr", node=program.node_index(node), text=text),) for node, text in found.zero]
                continue
            for node in found.split:
                elements = list(node.elements)
                if level == 0:
                    size = -(-len(elements) // CHUNKS)
                    runs = [elements[i:i + size] for i in range(0, len(elements), size)]
                elif CHUNKS < len(elements) <= MAX_SINGLES:
                    runs = [[e] for e in elements]
                else:
                    continue
                out += [tuple(Edit("remove", node=program.node_index(e)) for e in run) for run in runs]
        return dedupe(out)
