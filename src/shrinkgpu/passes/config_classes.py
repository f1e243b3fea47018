"""A configuration class's values read where the program reads them.

``class TrainConfig: lr = 0.01; model = ModelConfig()`` with ``cfg = TrainConfig()``
and ``cfg.lr`` keeps a class, an instance and an attribute read where a maintainer's cut
has ``0.01``.  A *configuration class* here is a top-level class with no base (or
``object``) and no methods, whose body only binds names: ``lr = 0.01``, ``lr: float =
0.01`` (a ``@dataclass`` too, built without arguments, takes the same defaults).  For
an instance made without arguments that the program only reads attributes of, and never
sets one on, each read becomes the value's text, when that value is a literal or another
configuration class built without arguments (``cfg.model`` -> ``ModelConfig()``: the
next round reads through it).  The instance's binding goes in the same unit; the class goes later, when nothing reads it (delete-definitions).

Why not propagate-constants: the value sits in a class body, and the name read is an
attribute of an instance, which no name binding connects to it.
"""

from __future__ import annotations

import ast

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit, single_bindings
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import assigned_attributes

_DATACLASS = ("dataclass", "dataclasses.dataclass")


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _class_values(node: cst.ClassDef) -> dict[str, cst.BaseExpression] | None:
    """The names a configuration class binds, and their values; None for any other class."""
    if any(code_of(b.value) != "object" for b in node.bases) or node.keywords:
        return None
    for d in node.decorators:
        target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if code_of(target) not in _DATACLASS:
            return None
    values: dict[str, cst.BaseExpression] = {}
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
    for line in body:
        if not isinstance(line, cst.SimpleStatementLine):
            return None  # a method, a nested class, a branch: not a plain record of values
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                           cst.Name):
                values[small.targets[0].target.value] = small.value
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                values[small.target.value] = small.value
            elif (isinstance(small, (cst.Pass, cst.AnnAssign))
                  or isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)):
                continue  # ``pass``, a field without a default, a docstring
            else:
                return None
    return values


class ConfigClassValues(LevelZeroPass):
    """``cfg = Config(); f(cfg.lr)`` -> ``f(0.01)`` for a class that only holds values."""

    name = "config-class-values"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        live = cand.live
        classes: dict[str, dict[str, cst.BaseExpression]] = {}
        for s in cand.editable():
            if s.parent is None and isinstance(s.node, cst.ClassDef) and s.id in live:
                values = _class_values(s.node)
                if values is not None:
                    classes[s.node.name.value] = values
        if not classes:
            return []

        def text_of(value: cst.BaseExpression) -> str | None:
            text = code_of(value)
            if _is_literal(text):
                return text
            if isinstance(value, cst.Call) and not value.args and code_of(value.func) in classes:
                return text
            return None

        out: list[Unit] = []
        for s, name, value, readers in single_bindings(cand):
            if not (isinstance(value, cst.Call) and not value.args and code_of(value.func) in classes):
                continue
            values = classes[code_of(value.func)]
            if any(a is None for _, a in readers) or any(deps.in_fstring(n) for n, _ in readers):
                continue  # the instance itself is used, or read in an f-string
            if assigned_attributes(program, name, readers):
                continue  # the program sets an attribute on it: the class's value is not the one read
            texts = {a.attr.value: text_of(values[a.attr.value]) if a.attr.value in values else None
                     for _, a in readers}
            if any(t is None for t in texts.values()):
                continue
            edits = [Edit("expr", node=program.node_index(a), text=texts[a.attr.value]) for _, a in readers]
            readers_at = frozenset(deps.enclosing(n) for n, _ in readers)
            out.append((*edits, *deletion_unit(cand, [s.id], ignore=readers_at)))
        return out
