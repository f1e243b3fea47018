"""Delete what the original never ran: the statements of the main script after the one
its first error left the script from.

The error propagated out of the module's top level, so whatever follows the failing
statement there (``trainer.save_model(...)``, an evaluation, the report) never ran, and
neither did what follows it in each block around it, up to the top.  A block that
repeats (a loop's body) ran its later statements in earlier iterations, and a ``try``
may have caught the error: the walk keeps a loop body's later statements and stops at the
first ``try``.  (A ``with`` that swallows errors, ``contextlib.suppress``, is rare: the
oracle's test catches it.)  One unit, tried like any other: the oracle decides.
What follows the failure still reads the objects the failing call needs (the trainer
that ``trainer.evaluate()`` reads after ``trainer.train()``), so without this unit a cut
of the statement that handed control to a library cannot drop them (the session's
starting cuts apply it first).
"""

from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate

_REPEATS = ("for", "while")
_CATCHES = ("try",)


class DeleteNeverRan(LevelZeroPass):
    """``trainer.train()`` (fails) + ``trainer.save_model(...)`` -> ``trainer.train()``."""

    name = "never-ran"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        main = program.main
        # the module-level frame of the main script: the outermost frame on the stack
        line = next((ln for f, ln in program.facts.stack if f == main), None)
        sid = program.deps.statement_at(main, line) if line is not None else None
        if sid is None:
            return []
        live = cand.live
        stmts = program.stmts
        drop: list[int] = []
        cur = sid
        while True:
            parent = stmts[cur].parent
            if parent is not None and stmts[parent].kind in _CATCHES:
                break
            if parent is None or stmts[parent].kind not in _REPEATS:
                siblings = [c for c in program.children.get(parent, ()) if stmts[c].file == main
                            and stmts[c].branch == stmts[cur].branch]
                drop += [c for c in siblings if c > cur and c in live]
            if parent is None:
                break
            cur = parent
        return [tuple(Edit("delete", s) for s in sorted(drop))] if drop else []


__all__ = ["DeleteNeverRan"]
