from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit
from shrinkgpu.syntax.program import Candidate


class DeleteDefinitions(LevelZeroPass):
    """Delete whole ``def`` and ``class`` statements, at any depth.

    Scripts carry many helpers the failure never reaches; they are independent of each
    other, so ddmin's first test (all of them at once) usually settles the matter.
    """

    name = "delete-definitions"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [deletion_unit(cand, [s.id]) for s in cand.editable() if s.kind in ("def", "class")]
