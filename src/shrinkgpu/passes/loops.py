"""Loops cut down to the iteration that fails.

A training script fails inside ``for epoch in ...: for batch in loader:``; a maintainer
writes ``batch = next(iter(loader))`` and the step.  This pass replaces a loop by one
execution of its body with the loop variable bound to the first item.  When the failure
needs a later item the candidate simply does not reproduce and the loop stays (the
oracle decides; nothing here guesses).
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, bound_sequence
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


def nth_item(iterable: cst.BaseExpression, n: int, program=None) -> tuple[str, str | None]:
    """(source for item ``n`` of ``iterable``, a module to import for it or None):
    ``range(1, 5)``, 2 -> ``3``; ``items`` bound to a list -> ``items[2]``; otherwise
    ``next(itertools.islice(..., n, None))``, which skips the first items without running
    the loop body on them."""
    if isinstance(iterable, cst.Name) and program is not None:
        if bound_sequence(program, iterable, (cst.List, cst.ListComp, cst.Tuple)):
            return f"{iterable.value}[{n}]", None
    if (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "enumerate"
        and len(iterable.args) == 1
        and iterable.args[0].keyword is None
        and not iterable.args[0].star
    ):
        inner, module = nth_item(iterable.args[0].value, n, program)
        return f"({n}, {inner})", module
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        args = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(args) == len(iterable.args) and len(args) in (1, 2):
            if len(args) == 1:
                return str(n), None
            start = args[0].value
            if isinstance(start, cst.Integer):
                return str(int(start.value, 0) + n), None
            return f"{_code(start)} + {n}", None
    return f"next(itertools.islice({_code(iterable)}, {n}, None))", "itertools"


class LoopToFirstIteration(LevelZeroPass):
    name = "loop-to-first-iteration"
    nth = False  # the failing iteration instead (LoopToFailingIteration)
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
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
            if not self.nth:
                lines = [f"{_code(loop.target)} = {first_item(loop.iter)}\n"]
            else:
                iteration = program.loop_iterations.get(s.id, 0)
                if iteration <= 0:
                    continue
                item, module = nth_item(loop.iter, iteration, program)
                lines = ([f"import {module}\n"] if module else []) + [f"{_code(loop.target)} = {item}\n"]
            lines += [_code(stmt) for stmt in loop.body.body]
            text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
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
