"""Programs proposed from outside (``--propose-with CMD``): a language model, a script of
the user's, any program that reads the best program so far and writes smaller ones.

The proposer never decides anything: each proposal becomes a unit of edits on the
current program, and the search judges units as it judges every pass's (the oracle:
the same bug, as reliably; only strictly smaller candidates) and merges the ones that
reproduce the same way.  A proposal is turned into the edits this package already has,
statement by statement (``difflib`` over each file's top-level statements): a statement
the proposal left out is ``delete``d, a run of statements it rewrote is ``replace``d by
the proposal's text, a statement it added goes in with its neighbour's ``replace``, a file
it names ``None`` is ``drop``ped.  So two proposals that cut different statements merge,
and one that rewrote a function and one that deleted a line elsewhere do too.

Seeding statements stay, as for every pass: a proposal that deletes one, or rewrites the
statement around it without it, is no unit.  Running the command is the reducer's
(reducer/proposer.py: passes start no processes); this module only sees a callable.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, dedupe
from shrinkgpu.syntax import Candidate, Edit, count_tokens


@dataclass(frozen=True)
class Proposal:
    """Whole files of a proposed program: path -> new text, or None for a file to leave
    out; files not named stay as they are."""

    files: Mapping[str, str | None]


# (the program's files, its main file) -> the proposals for it
Proposer = Callable[[Mapping[str, str], str], Sequence[Proposal]]


class ExternalProposals(EditPass):
    """One unit per proposal of ``propose`` for the current program, asked once per sweep
    of its tier (the last: what the passes could not shrink)."""

    name = "external"
    needs_rebased = True  # the edits are built on the statements' original texts

    def __init__(self, propose: Proposer):
        self.propose = propose

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level > 0:
            return None
        if self.waits(cand):
            return []
        program = cand.program
        proposals = self.propose(dict(program.texts), program.main)
        return dedupe([proposal_unit(cand, p) for p in proposals])

    def unit_size(self, cand: Candidate, unit: Unit) -> int:
        """Tokens the proposal takes out (what it adds counted against it)."""
        program = cand.program
        removed = 0
        for e in unit:
            if e.op == "delete":
                removed += program.stmts[e.stmt].size
            elif e.op == "replace":
                removed += program.stmts[e.stmt].size - count_tokens(e.text)
            elif e.op == "drop":
                removed += count_tokens(program.texts.get(e.file, ""))
        return max(0, removed)


def proposal_unit(cand: Candidate, proposal: Proposal) -> Unit:
    """The edits that turn ``cand``'s program (rebased: no edits of its own) into the
    proposal; () when it cannot be said that way (a file the program does not have, a
    file that does not parse, the main file left out, a seeding statement lost) or when
    it changes nothing."""
    program = cand.program
    edits: list[Edit] = []
    for path, text in sorted(proposal.files.items()):
        if path not in program.texts:
            return ()
        if text is None:
            if path == program.main:
                return ()
            edits.append(Edit("drop", file=path))
            continue
        if text == program.texts[path]:
            continue
        if not path.endswith(".py"):
            return ()  # a data file: not something the edits rewrite
        changed = file_edits(cand, path, text)
        if changed is None:
            return ()
        edits += changed
    if loses_seeding(cand, edits):
        return ()
    return tuple(sorted(edits))


def statement_code(module: cst.Module, stmt: cst.BaseStatement) -> str:
    """A statement's text without the blank and comment lines above it: what two
    versions of a file are matched on."""
    return module.code_for_node(stmt.with_changes(leading_lines=()) if hasattr(stmt, "leading_lines") else stmt)


def file_edits(cand: Candidate, path: str, text: str) -> list[Edit] | None:
    """``path``'s top-level statements matched with ``text``'s: the edits for what
    differs, or None when ``text`` does not parse or the file has no statement to hang
    new ones on."""
    program = cand.program
    try:
        new = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    old_ids = [sid for sid in program.children.get(None, []) if program.stmts[sid].file == path]
    module = program.modules[path]
    old = [statement_code(module, program.stmts[sid].node) for sid in old_ids]
    ours = [statement_code(new, stmt) for stmt in new.body]
    full = [new.code_for_node(stmt) for stmt in new.body]
    if not old_ids:
        return None if ours else []
    edits: list[Edit] = []
    matcher = difflib.SequenceMatcher(None, old, ours, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "delete":
            edits += [Edit("delete", old_ids[k]) for k in range(i1, i2)]
            continue
        # (the first statement of a replacement keeps the comment lines above the one it
        # replaces: the renderer's rule)
        added = "".join([ours[j1], *full[j1 + 1:j2]]) if j2 > j1 else ""
        if tag == "replace":
            edits.append(Edit("replace", old_ids[i1], text=added))
            edits += [Edit("delete", old_ids[k]) for k in range(i1 + 1, i2)]
        elif i1 < len(old_ids):  # insert: with the statement after it (the proposal's j2-th)
            edits.append(Edit("replace", old_ids[i1], text=added + full[j2]))
        else:  # at the end: with the one before it
            edits.append(Edit("replace", old_ids[i1 - 1], text=old[i1 - 1] + "".join(full[j1:j2])))
    return edits


def loses_seeding(cand: Candidate, edits: Sequence[Edit]) -> bool:
    """Whether ``edits`` delete a protected (seeding) statement, drop its file, or
    replace the statement around it with text that no longer holds it."""
    program = cand.program
    gone = {e.file for e in edits if e.op == "drop"}
    deleted = {e.stmt for e in edits if e.op == "delete"}
    replaced = {e.stmt: e.text for e in edits if e.op == "replace"}
    for sid in program.protected:
        top = sid
        while program.stmts[top].parent is not None:
            top = program.stmts[top].parent
        if program.stmts[sid].file in gone or top in deleted:
            return True
        if top in replaced and program.stmt_code(sid).strip() not in replaced[top]:
            return True
    return False
