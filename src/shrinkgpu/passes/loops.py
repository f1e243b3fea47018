"""Loops cut down to the iteration that fails.

A training script fails inside ``for epoch in ...: for batch in loader:``; a maintainer
writes ``batch = next(iter(loader))`` and the step.  This pass replaces a loop by one
execution of its body with the loop variable bound to the first item.  When the failure
needs a later item the candidate simply does not reproduce and the loop stays (the
oracle decides; nothing here guesses).
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.program import Candidate, Edit
from shrinkgpu.syntax.program import code_of as _code




class _LoopExits(cst.CSTVisitor):
    """``break``/``continue`` that belong to this loop (not to loops nested in it)."""

    def __init__(self):
        self.found = False

    def visit_Break(self, node: cst.Break) -> None:
        self.found = True

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_For(self, node: cst.For) -> bool:
        return False

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def first_item(iterable: cst.BaseExpression) -> str:
    """Source for the first item of ``iterable``: ``range(1, 5)`` -> ``1``, otherwise
    ``next(iter(...))``."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        args = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(args) == len(iterable.args) and len(args) in (1, 2):
            return "0" if len(args) == 1 else _code(args[0].value)
    return f"next(iter({_code(iterable)}))"


class LoopToFirstIteration(LevelZeroPass):
    name = "loop-to-first-iteration"

    def edits(self, cand: Candidate) -> list[Unit]:
        if cand.edits:
            return []  # the text below is the original's; wait for the next rebase
        program = cand.program
        out: list[Unit] = []
        for s in cand.editable():
            loop = s.node
            if s.kind != "for" or not isinstance(loop, cst.For) or loop.asynchronous is not None:
                continue
            if loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
                continue
            if s.id in program.protected:
                continue
            exits = _LoopExits()
            for stmt in loop.body.body:
                stmt.visit(exits)
            if exits.found:
                continue
            lines = [f"{_code(loop.target)} = {first_item(loop.iter)}\n"]
            lines += [_code(stmt) for stmt in loop.body.body]
            text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
            out.append((Edit("replace", s.id, text=text),))
        return out


class WhileToBody(LevelZeroPass):
    """``while cond: body`` -> ``body``, run once: the failure usually needs one pass
    through it, not the condition."""

    name = "while-to-body"

    def edits(self, cand: Candidate) -> list[Unit]:
        out: list[Unit] = []
        for s in cand.editable():
            if s.kind != "while" or s.node.orelse is not None:
                continue
            exits = _LoopExits()
            for stmt in getattr(s.node.body, "body", ()):
                stmt.visit(exits)
            if not exits.found:
                out.append((Edit("body", s.id),))
        return out
