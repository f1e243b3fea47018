"""Branches and blocks unwrapped: one pass class, four instances.

Each keeps one path through a compound statement and drops the rest: ``if`` -> its
then-branch or its ``else``, ``try`` -> the path without an exception, ``with`` -> its
body.  A unit never removes a protected (seeding) statement.
"""

from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit, drops_protected
from shrinkgpu.syntax.edits import BODY_BRANCHES, Edit
from shrinkgpu.syntax.program import Candidate


class Unwrap(LevelZeroPass):
    """Statements of ``kinds`` -> the part ``op`` keeps (``body``, or ``else``)."""

    def __init__(self, name: str, kinds: tuple[str, ...], op: str, doc: str, needs_else: bool = False):
        self.name = name
        self.kinds = kinds
        self.op = op
        self.needs_else = needs_else
        self.__doc__ = doc

    def edits(self, cand: Candidate) -> list[Unit]:
        out: list[Unit] = []
        for s in cand.editable():
            if s.kind not in self.kinds:
                continue
            if self.needs_else and s.node.orelse is None:
                continue
            dropped = _ELSE if self.op == "else" else BODY_BRANCHES.get(s.kind, frozenset())
            if s.kind != "with" and drops_protected(cand, s.id, dropped):
                continue
            out.append((Edit(self.op, s.id),))
        return out


_ELSE = frozenset({"orelse"})


def HoistThen() -> Unwrap:
    return Unwrap("if-to-then", ("if", "elif"), "body",
                  "``if c: A else: B`` -> ``A`` (the condition and the other branch go).")


def HoistElse() -> Unwrap:
    return Unwrap(
        "if-to-else", ("if", "elif"), "else", "``if c: A else: B`` -> ``B``; ``if c: A elif d: B`` -> ``if d: B``.",
        needs_else=True,
    )


def TryToBody() -> Unwrap:
    return Unwrap(
        "try-to-body", ("try",), "body",
        "``try: A except: H else: E finally: F`` -> ``A E F``: the path without an exception, with the handlers "
        "that could have swallowed or re-wrapped the error gone.",
    )


def UnwrapWith() -> Unwrap:
    return Unwrap(
        "unwrap-with", ("with",), "body",
        "``with ctx() as x: A`` -> ``A``: temporary directories, ``no_grad``, profilers and timers that the "
        "failure does not need.",
    )
