"""A configuration class's values read where the program reads them.

``class TrainConfig: lr = 0.01; model = ModelConfig()`` with ``cfg = TrainConfig()``
and ``cfg.lr`` keeps a class, an instance and an attribute read where a maintainer's cut
has ``0.01``.  A *configuration class* here is a top-level class with no base (or
``object``) and no methods, whose body only binds names: ``lr = 0.01``, ``lr: float =
0.01`` (a ``@dataclass`` too, built without arguments, takes the same defaults).  For
an instance made without arguments that the program only reads attributes of, and never
sets one on, each read becomes the value's text, when that value is a literal or another
configuration class built without arguments (``cfg.model`` -> ``ModelConfig()``: the
next round reads through it).  The instance's binding goes in the same unit; the class
goes later, when nothing reads it (delete-definitions).

Why not propagate-constants: the value sits in a class body, and the name read is an
attribute of an instance, which no name binding connects to it.
"""

from __future__ import annotations

import ast
import re

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit, single_bindings
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import assigned_attributes, bound_names

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


def _only_built_bare(program, sid: int, name: str) -> bool:
    """Whether the class bound at ``sid`` is the program's only ``name`` and every read
    of it builds it without arguments, reads an attribute of it, or annotates a
    signature: then each instance holds the class's values, unless something sets them."""
    deps = program.deps
    if deps.binders_named.get(name, set()) != {sid}:
        return False  # bound again, or imported under its name elsewhere
    for n in deps.reads(sid, name):
        call = deps.call_of(n)
        if call is not None:
            if call.args:
                return False
            continue
        if deps.attribute_around(n) is not None:
            continue
        enclosing = deps.enclosing(n)
        if enclosing is not None and isinstance(program.stmts[enclosing].node, cst.FunctionDef):
            continue  # ``def f(cfg: Config)``
        return False
    return True


# A program that sets attributes by name, through the instance's dict, or by handing it
# to a parser, can give an instance other values than its class's.
_SETS_BY_NAME = re.compile(r"\bsetattr\(|__dict__|\bnamespace\s*=|\breplace\(|\bOmegaConf\b|\bhydra\b")


class _Attributes(cst.CSTVisitor):
    def __init__(self, names: set[str]):
        self.names = names
        self.found: list[cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in self.names:
            self.found.append(node)


def _root_name(node: cst.BaseExpression) -> cst.Name | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node if isinstance(node, cst.Name) else None


class ConfigClassValues(LevelZeroPass):
    """``cfg = Config(); f(cfg.lr)`` -> ``f(0.01)`` for a class that only holds values."""

    name = "config-class-values"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        live = cand.live
        classes: dict[str, dict[str, cst.BaseExpression]] = {}
        class_sids: dict[str, int] = {}
        for s in cand.editable():
            if s.parent is None and isinstance(s.node, cst.ClassDef) and s.id in live:
                values = _class_values(s.node)
                if values is not None:
                    classes[s.node.name.value] = values
                    class_sids[s.node.name.value] = s.id
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
        return out + self._reads_elsewhere(cand, class_sids, classes, text_of)

    def _reads_elsewhere(self, cand: Candidate, class_sids, classes, text_of) -> list[Unit]:
        """``CNN(ModelConfig())`` and, in ``__init__(self, mcfg)``, ``mcfg.channels`` and
        ``self.mcfg.channels`` -> ``16``: an instance handed on as an argument or kept
        as an attribute, which no binding connects to its class.  An attribute name is
        read as the class's value when one configuration class binds it (or several,
        to the same text), no other class binds it, nothing sets it and the class is
        only ever built bare; its reads are grouped by what they read it from
        (``mcfg``, ``self.mcfg``), one unit each.  A read of an object of another kind
        that has the same attribute (a tensor's ``.dtype`` beside a config's) is then a
        unit of its own, which fails its run and is not taken."""
        program = cand.program
        deps = program.deps
        if any(_SETS_BY_NAME.search(text) for path, text in program.texts.items() if path.endswith(".py")):
            return []
        values: dict[str, str | None] = {}
        for cls_name, cls_values in classes.items():
            if not _only_built_bare(program, class_sids[cls_name], cls_name):
                continue
            for attr, value in cls_values.items():
                text = text_of(value)
                values[attr] = text if values.get(attr, text) == text else None
        others: set[str] = set()  # what the program's other classes bind or define
        for s in program.stmts:
            if isinstance(s.node, cst.ClassDef) and s.node.name.value not in class_sids:
                for c in program.children.get(s.id, ()):
                    others |= bound_names(program.stmts[c].node)
        names = {a for a, t in values.items() if t is not None and a not in others and not deps.attribute_written(a)}
        if not names:
            return []
        # Reads through a name bound to an instance are the first kind of unit's (or
        # refused by it: that instance is used whole)
        bare = {
            s.id for s, _, value, _ in single_bindings(cand)
            if isinstance(value, cst.Call) and not value.args and code_of(value.func) in classes
        }
        editable = {s.id for s in cand.editable()}
        groups: dict[tuple[str, str], list[cst.Attribute]] = {}
        for module in program.modules.values():
            found = _Attributes(names)
            module.visit(found)
            for a in found.found:
                if deps.enclosing(a) not in editable or deps.in_fstring(a) or deps.is_del_target(a):
                    continue
                if deps.call_of(a) is not None:
                    continue  # ``cfg.build()``: a value is no callable
                root = _root_name(a.value)
                if root is None or deps.binders(root) & bare:
                    continue
                if any(program.stmts[b].kind == "simple" and isinstance(program.stmts[b].node.body[0],
                                                                          (cst.Import, cst.ImportFrom))
                       for b in deps.binders(root)):
                    continue  # ``np.pi``: a module's attribute
                groups.setdefault((a.attr.value, code_of(a.value)), []).append(a)
        return [
            tuple(Edit("expr", node=program.node_index(a), text=values[attr]) for a in reads)
            for (attr, _), reads in groups.items()
        ]
