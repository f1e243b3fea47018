"""Decorators out of the way.

A timing or logging wrapper (``@timed("fit")``, ``@log_call``, any ``functools.wraps``
wrapper), a cache, ``@torch.no_grad()``: each stands between a call and the code it
runs, and a decorated function is not inlined.  Each decorator is a unit of its own:
without it the function is called directly, and the test says whether the decorator
mattered.  ``@property`` is the one a plain removal always breaks (``self.flat_dim``
becomes a bound method), so its unit also turns every read of that attribute into a
call (``self.flat_dim()``); the method can then be inlined like any other.  A
``@dataclass`` config made with no arguments reads its defaults as class attributes
once the decorator is gone, so its unit also turns ``field(default_factory=Sub)`` into
``Sub()`` and ``field(default=v)`` into ``v``.  Decorators
that only wrapped are left unused, and ``delete-definitions`` removes them.
"""

from __future__ import annotations

import re

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate


def _in_autograd_function(cand: Candidate, s) -> bool:
    """Whether statement ``s`` is a method of a ``torch.autograd.Function`` subclass."""
    if s.parent is None:
        return False
    owner = cand.program.stmts[s.parent].node
    return isinstance(owner, cst.ClassDef) and any(
        code_of(base.value).split(".")[-1] == "Function" for base in owner.bases)


class _Reads(cst.CSTVisitor):
    """Every ``<expr>.name`` read (not assigned) in a tree."""

    def __init__(self, name: str):
        self.name = name
        self.found: list[cst.Attribute] = []
        self.assigned = False  # ``x.name = ...`` somewhere: not only a property
        self._targets: set[int] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets.add(id(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets.add(id(node.target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != self.name:
            return
        if id(node) in self._targets:
            self.assigned = True
        else:
            self.found.append(node)


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n)

    node.visit(Names())
    return found


class _KeyedReads(cst.CSTVisitor):
    """``R["key"]`` and ``R.get("key")`` reads (not stores) of a name ``R``: (node, R)."""

    def __init__(self, key: str):
        self.key = key
        self.reads: list[tuple[cst.BaseExpression, str]] = []
        self._targets: set[int] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets.add(id(node.target))

    def visit_Del(self, node: cst.Del) -> None:
        self._targets.add(id(node.target))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self._targets or not isinstance(node.value, cst.Name) or len(node.slice) != 1:
            return
        el = node.slice[0].slice
        if (isinstance(el, cst.Index) and isinstance(el.value, cst.SimpleString)
                and el.value.evaluated_value == self.key):
            self.reads.append((node, node.value.value))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "get" and isinstance(func.value, cst.Name)
                and len(node.args) == 1 and isinstance(node.args[0].value, cst.SimpleString)
                and node.args[0].value.evaluated_value == self.key):
            self.reads.append((node, func.value.value))


class StripDecorators(LevelZeroPass):
    """``@timed("fit")\\ndef fit(...)`` -> ``def fit(...)``; ``@property`` reads become calls."""

    name = "strip-decorators"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        out: list[Unit] = []
        for s in cand.editable():
            node = s.node
            if not isinstance(node, (cst.FunctionDef, cst.ClassDef)) or not node.decorators:
                continue
            autograd = _in_autograd_function(cand, s)
            for dec in node.decorators:
                remove = Edit("remove", node=program.node_index(dec))
                text = code_of(dec.decorator)
                if autograd and text in ("staticmethod", "classmethod"):
                    # torch documents forward/backward/setup_context of an
                    # ``autograd.Function`` as static; a result without it reads as
                    # another mistake (``apply`` happens to call them either way)
                    continue
                if text == "property" and isinstance(node, cst.FunctionDef):
                    calls = self._property_reads(cand, node.name.value)
                    if calls is None:
                        continue
                    out.append((remove, *calls))
                elif text.split("(")[0] in ("dataclass", "dataclasses.dataclass") and isinstance(node, cst.ClassDef):
                    out.append((remove, *self._plain_fields(program, node)))
                else:
                    out.append((remove, *self._registry_reads(cand, dec, node.name.value)))
        return out

    def _registry_reads(self, cand: Candidate, dec: cst.Decorator, name: str) -> list[Edit]:
        """``@register(CONVS, "gcn")`` (or ``@CONVS.register("gcn")``, or a local
        ``@register_conv("gcn")`` whose body writes into ``CONVS``) on ``class GCN``:
        every ``CONVS["gcn"]`` / ``CONVS.get("gcn")`` becomes ``GCN``, so that without the
        decorator the program reaches the class by its name, as a maintainer's cut does."""
        call = dec.decorator
        if not isinstance(call, cst.Call):
            return []
        keys = {a.value.evaluated_value for a in call.args if isinstance(a.value, cst.SimpleString)}
        keys.discard(None)
        if len(keys) != 1:
            return []
        (key,) = keys
        program = cand.program
        deps = program.deps
        mentioned = {n.value for a in call.args for n in _names_in(a.value)} | {n.value for n in _names_in(call.func)}
        func = call.func
        if isinstance(func, cst.Name):
            for b in deps.binders(func):
                if program.stmts[b].kind == "def" or isinstance(program.stmts[b].node, cst.FunctionDef):
                    mentioned |= set(re.findall(r"[A-Za-z_]\w*", program.stmt_code(b)))
        edits: list[Edit] = []
        for path, module in program.modules.items():
            if path in cand.dropped_files:
                continue
            found = _KeyedReads(key)
            module.visit(found)
            for node, registry in found.reads:
                if registry in mentioned and deps.enclosing(node) in cand.live:
                    edits.append(Edit("expr", node=program.node_index(node), text=name))
        return edits

    def _plain_fields(self, program, node: cst.ClassDef) -> list[Edit]:
        """A dataclass without its decorator keeps its fields as class attributes, which
        an instance made with no arguments reads: ``field(default_factory=Sub)`` must
        then be ``Sub()`` and ``field(default=v)`` be ``v``."""
        edits = []
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                value = getattr(small, "value", None)
                if not isinstance(small, cst.AnnAssign) or not isinstance(value, cst.Call):
                    continue
                if code_of(value.func).split(".")[-1] != "field":
                    continue
                for arg in value.args:
                    if arg.keyword is None:
                        continue
                    if arg.keyword.value == "default_factory":
                        edits.append(Edit("expr", node=program.node_index(value), text=f"{code_of(arg.value)}()"))
                    elif arg.keyword.value == "default":
                        edits.append(Edit("expr", node=program.node_index(value), text=code_of(arg.value)))
        return edits

    def _property_reads(self, cand: Candidate, name: str) -> list[Edit] | None:
        """``x.name`` -> ``x.name()`` wherever the program reads that attribute; None if
        it is also set somewhere (a setter, an instance attribute of that name)."""
        program = cand.program
        edits: list[Edit] = []
        for path, module in program.modules.items():
            if path in cand.dropped_files:
                continue
            reads = _Reads(name)
            module.visit(reads)
            if reads.assigned:
                return None
            for attr in reads.found:
                edits.append(Edit("expr", node=program.node_index(attr), text=f"{code_of(attr)}()"))
            setter = f"@{name}.setter"
            if setter in program.texts[path]:
                return None
        return edits
