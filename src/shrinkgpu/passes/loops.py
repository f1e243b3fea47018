"""Loops cut down to the iteration that fails.

A training script fails inside ``for epoch in ...: for batch in loader:``; a maintainer
writes ``batch = next(iter(loader))`` and the step.  This pass replaces a loop by one
execution of its body with the loop variable bound to the first item.  When the failure
needs a later item the candidate simply does not reproduce and the loop stays (the
oracle decides; nothing here guesses).
"""

from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import one_iteration, runs_once


class LoopToFirstIteration(LevelZeroPass):
    name = "loop-to-first-iteration"
    nth = False  # the failing iteration instead (LoopToFailingIteration)
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        out: list[Unit] = []
        for s in cand.editable():
            if s.kind != "for" or s.id in program.protected:
                continue
            iteration = program.loop_iterations.get(s.id, 0) if self.nth else 0
            if self.nth and iteration <= 0:
                continue
            text = one_iteration(s.node, iteration, program)
            if text is not None:
                out.append((Edit("replace", s.id, text=text),))
        return out


class LoopToFailingIteration(LoopToFirstIteration):
    """A loop the original failed in at iteration k > 0 (counted in its first run)
    becomes iteration k: the earlier items skipped, their bodies not run.  A last resort,
    in the expression tier: cutting the data in front of the failing item (a dataset
    dropped from a ``ConcatDataset``) usually lets the first iteration fail instead, which
    needs no skipping and leaves the data smaller."""

    name = "loop-to-failing-iteration"
    nth = True


class WhileToBody(LevelZeroPass):
    """``while cond: body`` -> ``body``, run once: the failure usually needs one pass
    through it, not the condition."""

    name = "while-to-body"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [(Edit("body", s.id),) for s in cand.editable() if s.kind == "while" and runs_once(s.node)]
