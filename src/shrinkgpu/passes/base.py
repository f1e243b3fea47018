from __future__ import annotations

from typing import Sequence

from shrinkgpu.syntax.program import Candidate, Edit

Unit = tuple[Edit, ...]  # edits that only make sense together (a statement and its users)


class EditPass:
    """A pass whose units are groups of edits: applying units adds their edits."""

    name = "edit"

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        raise NotImplementedError

    def apply(self, cand: Candidate, units: Sequence[Unit]) -> Candidate:
        return cand.with_edits(e for unit in units for e in unit)


class LevelZeroPass(EditPass):
    """A pass without levels: everything is proposed at level 0."""

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level > 0:
            return None
        return dedupe(self.edits(cand))

    def edits(self, cand: Candidate) -> list[Unit]:
        raise NotImplementedError


def dedupe(units: Sequence[Unit]) -> list[Unit]:
    seen: set[frozenset[Edit]] = set()
    out = []
    for u in units:
        key = frozenset(u)
        if key and key not in seen:
            seen.add(key)
            out.append(u)
    return out


def deletion_unit(cand: Candidate, roots) -> Unit:
    """Delete ``roots`` with everything that would be left reading a name nothing binds."""
    closure = cand.program.deps.deletion_closure(cand, roots)
    # Descendants go with their ancestor; naming them too would only repeat it.
    stmts = cand.program.stmts
    top = [s for s in closure if stmts[s].parent not in closure]
    return tuple(Edit("delete", s) for s in sorted(top))
