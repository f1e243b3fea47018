"""Statements and the edits on them: what program.py, deps.py and render.py all speak.

Below all three, so that the program can build its dependencies and render its
candidates without either of them importing the program back.

Edits:

``delete``   remove a statement (an emptied block gets ``pass``)
``body``     replace a compound statement by its body: ``if`` -> its then-branch, ``try``
             -> body + ``else`` + ``finally`` (the path without an exception), ``with``
             -> body
``else``     replace an ``if`` by its ``else`` branch (an ``elif`` chain becomes an ``if``)
``inline``   replace ``import mod`` / ``from mod import ...`` of a local module by the
             module's own (edited) statements
``drop``     leave a local module file out of the program
``replace``  new text (one or more statements) for a statement (a compound one's
             children go with it)
``expr``     new text for one expression of the original
``remove``   take one original node (a call argument, a collection element) out of the
             sequence that holds it
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import libcst as cst

from shrinkgpu.syntax.code import code_of

__all__ = ["BODY_BRANCHES", "PASS_LINE", "STRUCTURAL", "Edit", "EditOp", "Stmt", "import_targets"]

# Which parts of a compound statement survive a ``body`` edit.
BODY_BRANCHES: dict[str, frozenset[str]] = {
    "if": frozenset({"body"}),
    "elif": frozenset({"body"}),
    "try": frozenset({"body", "orelse", "finalbody"}),
    "with": frozenset({"body"}),
    "for": frozenset({"body"}),
    "while": frozenset({"body"}),
}

# One node for every emptied block: the renderer recognises the ``pass`` it added by
# identity, and drops an ``else:`` or ``finally:`` that holds only this one.
PASS_LINE = cst.SimpleStatementLine(body=[cst.Pass()])


@dataclass(frozen=True)
class Stmt:
    id: int
    file: str
    node: cst.CSTNode = field(compare=False, repr=False)
    parent: int | None
    branch: str | None  # the part of the parent holding it: body/orelse/handlers/finalbody/cases
    kind: str
    depth: int
    size: int  # tokens of its original text


class EditOp(str, enum.Enum):
    """What an edit does (the module's docstring says each)."""

    DELETE = "delete"
    BODY = "body"
    ELSE = "else"
    INLINE = "inline"
    DROP = "drop"
    REPLACE = "replace"
    EXPR = "expr"
    REMOVE = "remove"

    # Compared, hashed, sorted and printed as the word itself: an edit written with the
    # word (``Edit("delete", 3)``) is the same edit.
    __str__ = str.__str__

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)

    __hash__ = str.__hash__


@dataclass(frozen=True, order=True)
class Edit:
    op: EditOp
    stmt: int = -1
    file: str = ""
    node: int = -1  # for ``expr``: index of an original expression node (Program.node_index)
    text: str = ""  # for ``replace`` and ``expr``: the new code

    def __post_init__(self) -> None:
        if not isinstance(self.op, EditOp):
            object.__setattr__(self, "op", EditOp(self.op))  # ValueError for an operation that does not exist

    def __repr__(self) -> str:
        if self.op == "expr":
            return f"expr(@{self.node} -> {self.text!r})"
        if self.op == "remove":
            return f"remove(@{self.node})"
        target = f"#{self.stmt}" if self.stmt >= 0 else self.file
        extra = f", {self.text!r}" if self.text else ""
        return f"{self.op}({target}{extra})"


# Edits that change a statement's shape; a statement carrying one is no longer offered to
# other passes.  ``replace`` (new text for a simple statement) and ``expr`` (new text for
# one expression) are refinements: a newer one for the same target supersedes the older.
STRUCTURAL = frozenset({EditOp.DELETE, EditOp.BODY, EditOp.ELSE, EditOp.INLINE})


def import_targets(node: cst.CSTNode, file: str | None = None) -> tuple[str, list[tuple[str, str | None]]] | None:
    """For a line holding one plain import: (module, [(name, alias)]); else None.

    ``import mod`` gives ("mod", []); ``from mod import a, b as c`` gives ("mod",
    [("a", None), ("b", "c")]); ``from mod import *`` gives ("mod", [("*", None)]).
    A relative import (``from .models import Net`` in ``pkg/train.py``) is resolved
    against ``file``'s package: ("pkg.models", [("Net", None)]).
    """
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    imp = node.body[0]
    if isinstance(imp, cst.Import):
        if len(imp.names) != 1:
            return None
        return _dotted(imp.names[0].name), []
    if isinstance(imp, cst.ImportFrom):
        if imp.module is None:
            return None  # ``from . import mod``: modules as attributes, not rewritten
        module = _dotted(imp.module)
        if imp.relative:
            package = _package_of(file, len(imp.relative)) if file is not None else None
            if package is None:
                return None
            module = f"{package}.{module}" if package else module
        if isinstance(imp.names, cst.ImportStar):
            return module, [("*", None)]
        names = []
        for alias in imp.names:
            asname = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
            names.append((_dotted(alias.name), asname))
        return module, names
    return None


def _package_of(file: str, level: int) -> str | None:
    """The package a relative import of ``level`` dots in ``file`` starts from
    (``pkg/__init__.py``, 1 -> ``pkg``; ``pkg/sub/m.py``, 2 -> ``pkg``)."""
    parts = file.split("/")[:-1]  # the directories: the file's own package
    up = level - 1
    if up > len(parts) or not parts:
        return None
    return ".".join(parts[: len(parts) - up])


def _dotted(node) -> str:
    return code_of(node)
