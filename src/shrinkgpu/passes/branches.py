from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit, drops_protected
from shrinkgpu.syntax.program import BODY_BRANCHES, Candidate, Edit

_ELSE = frozenset({"orelse"})


class HoistThen(LevelZeroPass):
    """``if c: A else: B`` -> ``A`` (the condition and the other branch go)."""

    name = "if-to-then"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [
            (Edit("body", s.id),)
            for s in cand.editable()
            if s.kind in ("if", "elif") and not drops_protected(cand, s.id, BODY_BRANCHES[s.kind])
        ]


class HoistElse(LevelZeroPass):
    """``if c: A else: B`` -> ``B``; ``if c: A elif d: B`` -> ``if d: B``."""

    name = "if-to-else"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [
            (Edit("else", s.id),)
            for s in cand.editable()
            if s.kind in ("if", "elif") and s.node.orelse is not None and not drops_protected(cand, s.id, _ELSE)
        ]


class TryToBody(LevelZeroPass):
    """``try: A except: H else: E finally: F`` -> ``A E F``: the path without an
    exception, with the handlers that could have swallowed or re-wrapped the error gone."""

    name = "try-to-body"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [
            (Edit("body", s.id),)
            for s in cand.editable()
            if s.kind == "try" and not drops_protected(cand, s.id, BODY_BRANCHES["try"])
        ]


class UnwrapWith(LevelZeroPass):
    """``with ctx() as x: A`` -> ``A``: temporary directories, ``no_grad``, profilers and
    timers that the failure does not need."""

    name = "unwrap-with"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [(Edit("body", s.id),) for s in cand.editable() if s.kind == "with"]
