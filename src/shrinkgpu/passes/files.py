from __future__ import annotations

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate, inline_candidates


class InlineModules(LevelZeroPass):
    """Replace the import of a local module by the module's (reduced) statements, so
    that the result can be a single self-contained file."""

    name = "inline-modules"

    def edits(self, cand: Candidate) -> list[Unit]:
        return [(Edit("inline", s.id, path),) for s, path in inline_candidates(cand)]


class DropFiles(LevelZeroPass):
    """Leave out local module files nothing needs any more."""

    name = "drop-files"

    def edits(self, cand: Candidate) -> list[Unit]:
        main = cand.program.main
        return [(Edit("drop", file=path),) for path in sorted(cand.files) if path != main]
