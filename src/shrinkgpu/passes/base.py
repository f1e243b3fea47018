from __future__ import annotations

from typing import Sequence

from shrinkgpu.syntax.program import Candidate, Edit


class EditPass:
    """A pass whose units are edits: applying units adds them to the candidate."""

    name = "edit"

    def units(self, cand: Candidate, level: int) -> Sequence[Edit] | None:
        raise NotImplementedError

    def apply(self, cand: Candidate, units: Sequence[Edit]) -> Candidate:
        return cand.with_edits(units)


class LevelZeroPass(EditPass):
    """A pass without levels: everything is proposed at level 0."""

    def units(self, cand: Candidate, level: int) -> Sequence[Edit] | None:
        if level > 0:
            return None
        return self.edits(cand)

    def edits(self, cand: Candidate) -> list[Edit]:
        raise NotImplementedError
