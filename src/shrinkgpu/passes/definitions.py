from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import needed_by_callers


class DeleteDefinitions(LevelZeroPass):
    """Delete whole ``def`` and ``class`` statements, at any depth.

    Scripts carry many helpers the failure never reaches; they are independent of each
    other, so ddmin's first test (all of them at once) usually settles the matter.
    """

    name = "delete-definitions"

    def edits(self, cand: Candidate) -> list[Unit]:
        # A method a caller uses is not offered alone (passes/statements.py says why).
        # Only the class members: a definition whose deletion takes a needed ``return``
        # with it (a helper and the lines that read it) is left to the test, as it was
        # when this was measured (docs/benchmarks.md).
        stmts = cand.program.stmts
        needed = {s for s in needed_by_callers(cand) if isinstance(stmts[stmts[s].parent].node, cst.ClassDef)}
        units = [deletion_unit(cand, [s.id]) for s in cand.editable() if s.kind in ("def", "class")
                 and s.id not in needed]
        return [u for u in units if not any(e.stmt in needed for e in u)]


class PruneImports(LevelZeroPass):
    """``from torch.utils.data import DataLoader, Dataset`` -> ``... import Dataset`` once
    nothing reads ``DataLoader``: statement deletion can only take the whole line, and a
    maintainer reading the repro takes every imported name as a hint."""

    name = "prune-imports"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        for s in cand.editable():
            node = s.node
            if s.kind != "simple" or len(node.body) != 1:
                continue
            small = node.body[0]
            if not isinstance(small, (cst.Import, cst.ImportFrom)) or isinstance(small.names, cst.ImportStar):
                continue
            if isinstance(small, cst.ImportFrom) and small.module is not None and code_of(small.module) == "__future__":
                continue
            aliases = list(small.names)
            if len(aliases) < 2:
                continue
            unread = [
                a for a in aliases
                if not deps.readers(s.id, code_of(a.asname.name if a.asname else a.name).split(".")[0])
            ]
            if unread and len(unread) < len(aliases):
                out.append(tuple(Edit("remove", node=program.node_index(a)) for a in unread))
        return out
