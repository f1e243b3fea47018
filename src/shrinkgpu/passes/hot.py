"""Where the run time goes is cut first.

A script that trains for 3000 steps and then fails in ``generate()`` costs two minutes
per candidate until the training loop is gone; every pass before that pays for it.  The
original's first run sampled where its time went, by loop (``probe.loops.LoopClock``); this
pass comes first and offers, for each loop that took a large share of it
(``Facts.hot_loops``):

- level 0: a loop the failure is not inside -> deleted, with what only it needed; a
  loop the failure is inside -> the iteration that failed (``for``) or one pass
  (``while``);
- level 1: a loop the failure is not inside, whose work the failure needs (a model that
  must have taken a step) -> its first iteration only.

The oracle decides, as everywhere: a training phase whose weights the failure needs is
simply kept.
"""

from __future__ import annotations

from shrinkgpu.passes.base import EditPass, Unit, deletion_unit
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.facts import loop_header
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import encloses, failing_statements, one_iteration, runs_once

# More than this many hot loops is a flat profile: ordering buys nothing.
MAX_HOT = 3


class CutHotLoops(EditPass):
    """A loop that took most of the run: deleted, or cut to one iteration."""

    name = "cut-hot-loops"
    needs_rebased = True

    def units(self, cand: Candidate, level: int):
        if level > 1:
            return None
        if self.waits(cand):
            return []
        program = cand.program
        hot = {(file, header): share for file, header, share in program.facts.hot_loops}
        if not hot:
            return []
        found = []
        for s in cand.editable():
            if s.kind not in ("for", "while") or s.id in program.protected:
                continue
            share = hot.get((s.file, loop_header(s.node)))
            if share is not None:
                found.append((share, s))
        found.sort(key=lambda pair: -pair[0])
        failing = failing_statements(program)
        out: list[Unit] = []
        for _share, s in found[:MAX_HOT]:
            inside = bool(failing & _descendants(program, s.id))
            unit = self._unit(cand, s, inside, level)
            if unit:
                out.append(unit)
        return out

    def _unit(self, cand: Candidate, s, inside: bool, level: int) -> Unit:
        program = cand.program
        if not inside and level == 0:
            unit = deletion_unit(cand, {s.id})
            if not unit:
                return ()
            # What only the loop used (its optimizer, its loader) goes with it, side
            # effects or not: the test says whether they mattered.
            gone = frozenset(d for e in unit for d in _descendants(program, e.stmt))
            more = program.deps.dead_binders(cand, gone, (), pure_only=False) - program.protected
            more = {m for m in more if not any(encloses(program, g, m) for g in gone)}
            top = sorted(m for m in more if program.stmts[m].parent not in more)
            return (*unit, *(Edit("delete", m) for m in top))
        if inside and level == 1:
            return ()
        if s.kind == "while":
            return (Edit("body", s.id),) if runs_once(s.node) else ()
        iteration = program.loop_iterations.get(s.id, 0) if inside else 0
        text = one_iteration(s.node, iteration, program)
        return (Edit("replace", s.id, text=text),) if text is not None else ()

    def unit_size(self, cand: Candidate, unit: Unit) -> int:
        stmts = cand.program.stmts
        return sum(stmts[e.stmt].size for e in unit if e.stmt >= 0)


def _descendants(program, sid: int) -> set[int]:
    """``sid`` and every statement nested in it."""
    out = {sid}
    for s in program.stmts:
        cur = s.parent
        while cur is not None:
            if cur == sid:
                out.add(s.id)
                break
            cur = program.stmts[cur].parent
    return out
