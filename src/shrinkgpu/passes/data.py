"""Load the user's data objects instead of building them.

A dataset that synthesises its samples from a seeded generator (random lengths, random
point counts) pins the shapes the failing call sees.  The strict signature keeps those
shapes, so every edit that changes how many numbers the constructor draws before them
is rejected, and the constructor, its helpers and the generator's seeding stay in the
result however little of them the bug needs.

The original's first run pickled the data objects alive at its first error: instances
of the user's own classes that hold arrays, tensors or long lists, never a model or an
optimizer, whose construction is configuration a maintainer reads
(``probe.saved_objects``).  For each, this pass offers one candidate: the statement that
built it (``train_set = SyntheticKWS(args.per_class, seed=args.seed)``) loads the saved
object instead.  What the failing path calls on it (``__getitem__``, a sampler, a
collate function) stays and is reduced further; the constructor and what only it read
go once nothing calls them.  The oracle decides, as for every candidate: a load that no
longer fails the same way (the failure needed the object's state as built, not as it
was at the error) is rejected.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, names_read
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.facts import SavedObject
from shrinkgpu.syntax.program import Candidate


def load_text(name: str, saved: SavedObject) -> str:
    """The statements that bind ``name`` to the saved object, from beside the file."""
    return (
        "import pathlib\nimport pickle\n"
        f"{name} = pickle.loads(pathlib.Path(__file__).with_name({saved.file!r}).read_bytes())\n"
    )


def _built_name(node: cst.CSTNode) -> str | None:
    """``name`` for ``name = call(...)``, the one form a constructor's result takes."""
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    stmt = node.body[0]
    if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.value, cst.Call):
        return None
    target = stmt.targets[0].target
    return target.value if isinstance(target, cst.Name) else None


# A smaller object is a handful of values the passes above can show as code (a list
# literal, a ``torch.randint``), and its constructor is often where the bad values come
# from (labels numbered from 1): loading it would hide that for a few tokens.  Data
# synthesised in bulk is what no pass can write down.
MIN_BYTES = 16 * 1024


class LoadSavedObjects(LevelZeroPass):
    """``train_set = SyntheticKWS(32, seed=1)`` -> ``train_set = pickle.loads(...)``."""

    name = "load-saved-objects"

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        saved = {s.name: s for s in program.facts.saved_objects if s.size >= MIN_BYTES}
        if not saved:
            return []
        live = cand.live
        units: list[Unit] = []
        for s in program.stmts:
            if s.id not in live or s.kind != "simple":
                continue
            obj = saved.get(_built_name(s.node) or "")
            # The file lies beside the main script; ``__file__`` names the file that
            # holds the statement, so only statements of that directory can load it.
            if obj is None or str(PurePosixPath(s.file).parent) != (obj.directory or "."):
                continue
            text = load_text(obj.name, obj)
            # The constructor goes with the statement (unpickling never calls it), and
            # what only it and the statement read (its helpers, its config, its
            # generator): without them the unit would grow the program and never be
            # tried.  The class stays: unpickling finds it by name.  Another statement
            # that still builds the class fails without ``__init__``; the oracle says so.
            init = _constructor(program, s.file, obj.cls, live)
            gone = frozenset({s.id} | (set(range(init, program.last[init] + 1)) if init is not None else set()))
            kept = names_read(text) | {obj.cls.split(".")[0]}
            unread = program.deps.dead_binders(cand, gone, kept, pure_only=False)
            top = sorted(u for u in unread if program.stmts[u].parent not in unread)
            deletes = ([init] if init is not None else []) + [u for u in top if u != init]
            units.append((Edit("replace", s.id, text=text), *(Edit("delete", u) for u in deletes)))
        return units


def _constructor(program, file: str, qualname: str, live) -> int | None:
    """The statement id of ``__init__`` defined in the body of the class ``qualname``
    (the class of the file's top level or nested in one, as its qualified name says)."""
    parent: int | None = None
    for part in qualname.split("."):
        found = next(
            (
                t.id for t in program.stmts
                if t.file == file and t.parent == parent and t.id in live
                and isinstance(t.node, cst.ClassDef) and t.node.name.value == part
            ),
            None,
        )
        if found is None:
            return None
        parent = found
    return next(
        (
            t.id for t in program.stmts
            if t.parent == parent and t.id in live and isinstance(t.node, cst.FunctionDef) and t.node.name.value == "__init__"
        ),
        None,
    )
