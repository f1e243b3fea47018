from __future__ import annotations

from typing import Sequence

from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate

Unit = tuple[Edit, ...]  # edits that only make sense together (a statement and its users)


class EditPass:
    """A pass whose units are groups of edits: applying units adds their edits.

    ``needs_rebased``: the pass builds its edits from statements' original texts, which
    are stale in a candidate that already carries edits; it proposes nothing there and
    waits for the next rebase (the reducer re-parses every accepted candidate)."""

    name = "edit"
    needs_rebased = False

    def waits(self, cand: Candidate) -> bool:
        return self.needs_rebased and bool(cand.edits)

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        raise NotImplementedError

    def apply(self, cand: Candidate, units: Sequence[Unit]) -> Candidate:
        return cand.with_edits(e for unit in units for e in unit)

    def unit_size(self, cand: Candidate, unit: Unit) -> int:
        """Tokens the unit's statements hold (an estimate of what it removes)."""
        stmts = cand.program.stmts
        return sum(stmts[e.stmt].size for e in unit if e.stmt >= 0 and e.op == "delete")

    def unit_key(self, cand: Candidate, unit: Unit) -> tuple:
        """The same for the same change in a later (re-parsed) program: what it touches,
        by text, and what it does."""
        program = cand.program
        parts = []
        for e in unit:
            if e.stmt >= 0:
                parts.append((e.op, program.stmt_code(e.stmt), e.text))
            elif e.node >= 0:
                parts.append((e.op, program.node_code(e.node), e.text))
            else:
                parts.append((e.op, e.file))
        return (self.name, tuple(parts))


def names_read(text: str) -> set[str]:
    """Every identifier in ``text`` (code, or an expression)."""
    if not text:
        return set()
    import io
    import tokenize

    try:
        return {t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Pasted statements with mixed indentation: every word is a superset of the
        # names, which is the safe side for "is this name still read?".
        import re

        return set(re.findall(r"[^\W\d]\w*", text))


def _within(program, sid: int, ancestor: int) -> bool:
    cur: int | None = sid
    while cur is not None:
        if cur == ancestor:
            return True
        cur = program.stmts[cur].parent
    return False


def drops_protected(cand: Candidate, sid: int, surviving: frozenset[str]) -> bool:
    """Whether hoisting the branches ``surviving`` of ``sid`` would lose a protected
    statement that sits in another branch."""
    program = cand.program
    for p in program.protected:
        cur = p
        while cur is not None:
            parent = program.stmts[cur].parent
            if parent == sid:
                if program.stmts[cur].branch not in surviving:
                    return True
                break
            cur = parent
    return False


class LevelZeroPass(EditPass):
    """A pass without levels: everything is proposed at level 0."""

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level > 0:
            return None
        if self.waits(cand):
            return []
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


def deletion_unit(
    cand: Candidate, roots, ignore: frozenset[int] = frozenset(), copied: bool = False, new_text: str = ""
) -> Unit:
    """Delete ``roots`` with everything that would be left reading a name nothing binds,
    and the plain bindings nothing reads any more; nothing at all if that would remove a
    protected (seeding) statement -- unless ``copied``: the unit pastes the roots' bodies
    elsewhere (inlining), seeding included.  ``new_text``: code the same unit adds, whose
    names keep their bindings."""
    program = cand.program
    closure = program.deps.deletion_closure(cand, roots, ignore)
    closure |= program.deps.dead_binders(cand, closure, names_read(new_text))
    at_risk = closure & program.protected
    if copied:
        at_risk = {p for p in at_risk if not any(_within(program, p, r) for r in roots)}
    if at_risk:
        return ()
    # Descendants go with their ancestor; naming them too would only repeat it.
    stmts = cand.program.stmts
    top = [s for s in closure if stmts[s].parent not in closure]
    return tuple(Edit("delete", s) for s in sorted(top))


def lone_assignment(node):
    """The ``cst.Assign`` of a line that is one assignment to one target (``x = v``,
    ``self.rows = []``), else None."""
    import libcst as cst

    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    assign = node.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    return assign


def single_bindings(cand: Candidate):
    """(statement, name, value, live reads) for each ``name = value`` line whose reads
    of ``name`` only it can satisfy; each read is (Name node, the ``name.attr`` around it
    or None), each Name once.  (The statement also binds the names of a comprehension in
    its value, and a read in a comprehension is listed once per scope that sees it:
    neither is a read of ``name``.)"""
    import libcst as cst

    deps = cand.program.deps
    live = cand.live
    for s in cand.editable():
        assign = lone_assignment(s.node) if s.kind == "simple" else None
        if assign is None or not isinstance(assign.targets[0].target, cst.Name):
            continue
        name = assign.targets[0].target.value
        readers = list({
            id(n): (n, a) for n, a in deps.sole_readers.get(s.id, ())
            if n.value == name and deps.enclosing_live(n, live)
        }.values())
        if readers:
            yield s, name, assign.value, readers
