from __future__ import annotations

from typing import Sequence

from shrinkgpu.passes.base import EditPass, LevelZeroPass, Unit, dedupe, deletion_unit
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import needed_by_callers


class DeleteStatements(EditPass):
    """Hierarchical delta debugging: delete statements, one nesting level at a time.

    Level 0 is the module body; level d holds statements inside d compound statements
    as the candidate renders them.  Deleting outer statements first removes whole
    subtrees in one test, so inner levels are only searched where they survived.  Each
    unit is a statement with the statements that read what only it binds, so candidates
    do not merely die of ``NameError``.
    """

    name = "delete-statements"

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        stmts = cand.editable()
        if not stmts:
            return None
        depths = {s.id: cand.depth(s.id) for s in stmts}
        if level > max(depths.values()):
            return None
        # A function's last ``return`` whose value a caller uses, and a class's member
        # that a caller uses, are not offered: without them every candidate that holds
        # the deletion fails at the caller (in a long script, most candidates failed so,
        # each a whole run).  The function or class still goes whole, with its callers.
        # (A unit deletes such a return also when it deletes what the return reads.)
        needed = needed_by_callers(cand)
        units = [deletion_unit(cand, [s.id]) for s in stmts if depths[s.id] == level and s.id not in needed]
        return dedupe([u for u in units if not any(e.stmt in needed for e in u)])


class SliceToFailure(LevelZeroPass):
    """Delete in one step everything the failing statements cannot depend on.

    Seeds are the statements on the first error's user frames (the call chain down to
    the failing line), plus seeding calls; the slice follows name bindings, in-place
    mutations, attribute writes and enclosing statements.  It is an approximation (global
    state such as random streams is invisible to it), so it is one optimistic test: if
    the slice does not reproduce, the other passes do the work.
    """

    name = "slice"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        seeds = set()
        for file, line in program.facts.stack:
            sid = deps.statement_at(file, line)
            if sid is not None:
                seeds.add(sid)
        if not seeds:
            return []
        keep = deps.backward_slice(cand, seeds | program.protected)
        stmts = program.stmts
        drop = [s.id for s in cand.editable() if s.id not in keep and stmts[s.id].parent in keep | {None}]
        return [tuple(Edit("delete", s) for s in drop)] if drop else []
