"""One assignment per target.

``self.model, self.cfg = model, cfg`` binds two things in one statement, so a statement
deletion can only keep both or lose both: the attribute nothing reads lives as long as
the one that is read.  Split into ``self.model = model`` and ``self.cfg = cfg``, each is
a statement of its own and the dead one can go.  Only when the value is a tuple of the
same length, nothing is starred, and no value reads a target that an earlier part of the
split would already have set (``a, b = b, a`` stays).
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, lone_assignment, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate


def _plain_target(node: cst.BaseExpression) -> bool:
    """A name or an attribute chain on a name (``x``, ``self.fc``): nothing evaluated."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _elements(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if not isinstance(node, (cst.Tuple, cst.List)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in node.elements):
        return None
    return [e.value for e in node.elements]


class SplitAssignments(LevelZeroPass):
    """``self.a, self.b = a, b`` -> ``self.a = a`` / ``self.b = b``."""

    name = "split-assignments"
    needs_rebased = True  # the statement is rewritten from its original text

    def edits(self, cand: Candidate) -> list[Unit]:
        out: list[Unit] = []
        for s in cand.editable():
            assign = lone_assignment(s.node) if s.kind == "simple" else None
            if assign is None:
                continue
            targets, values = _elements(assign.targets[0].target), _elements(assign.value)
            if not targets or values is None or len(targets) != len(values) or len(targets) < 2:
                continue
            if not all(_plain_target(t) for t in targets):
                continue
            set_so_far: set[str] = set()
            clash = False
            for target, value in zip(targets, values):
                if set_so_far & names_read(code_of(value)):
                    clash = True
                    break
                set_so_far |= (names_read(code_of(target)) - {"self", "cls"} if isinstance(target, cst.Attribute)
                               else {target.value})
            if clash:
                continue
            text = "\n".join(f"{code_of(t)} = {code_of(v)}" for t, v in zip(targets, values))
            out.append((Edit("replace", s.id, text=text),))
        return out
