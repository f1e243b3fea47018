from __future__ import annotations

from typing import Sequence

from shrinkgpu.passes.base import EditPass
from shrinkgpu.syntax.program import Candidate, Edit


class DeleteStatements(EditPass):
    """Hierarchical delta debugging: delete statements, one nesting level at a time.

    Level 0 is the module body; level d holds statements inside d compound statements
    as the candidate renders them.  Deleting outer statements first removes whole
    subtrees in one test, so inner levels are only searched where they survived.
    """

    name = "delete-statements"

    def units(self, cand: Candidate, level: int) -> Sequence[Edit] | None:
        stmts = cand.editable()
        if not stmts:
            return None
        depths = {s.id: cand.depth(s.id) for s in stmts}
        if level > max(depths.values()):
            return None
        return [Edit("delete", s.id) for s in stmts if depths[s.id] == level]
