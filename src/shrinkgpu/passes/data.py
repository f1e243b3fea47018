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

A program started at its failing step from the saved state (passes/replay.py) is offered
the results of the user's data helpers too: ``train, val, test = build_splits(cfg)``
becomes ``train, val, test = pickle.loads(...)``, and the helper with what only it reads
goes.  Its candidates would otherwise each run the data pipeline before the restore, and
the result loads the user's data from the state's file already; a program that runs
from its start keeps the helper, which shows where the values come from.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, names_read
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.facts import SavedObject
from shrinkgpu.syntax.program import Candidate


def load_text(name: str, saved: SavedObject) -> str:
    """The statements that bind ``name`` (``a, b`` for a helper's two results) to the
    saved object, from beside the file."""
    return (
        "import pathlib\nimport pickle\n"
        f"{name} = pickle.loads(pathlib.Path(__file__).with_name({saved.file!r}).read_bytes())\n"
    )


def _built(node: cst.CSTNode) -> tuple[tuple[str, ...], bool] | None:
    """The names ``name = call(...)`` or ``a, b = helper(...)`` binds, and whether the call
    is of a bare name (a helper's, as the probe saves them)."""
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    stmt = node.body[0]
    if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.value, cst.Call):
        return None
    target = stmt.targets[0].target
    bare = isinstance(stmt.value.func, cst.Name)
    if isinstance(target, cst.Name):
        return (target.value,), bare
    if isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements
    ):
        return tuple(e.value.value for e in target.elements), bare  # type: ignore[attr-defined]
    return None


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
        # A helper's results only for a program started from the saved state: it loads the
        # user's data already, and otherwise the helper is what shows where the values
        # came from.
        started_at_state = program.facts.state is not None
        saved = {
            (s.targets or (s.name,), bool(s.targets)): s for s in program.facts.saved_objects
            if s.size >= MIN_BYTES and (started_at_state or not s.targets)
        }
        if not saved:
            return []
        live = cand.live
        units: list[Unit] = []
        for s in program.stmts:
            if s.id not in live or s.kind != "simple":
                continue
            built = _built(s.node)
            if built is None:
                continue
            names, bare = built
            obj = saved.get((names, False)) if len(names) == 1 else None
            if obj is None and bare:
                obj = saved.get((names, True))
            # The file lies beside the main script; ``__file__`` names the file that
            # holds the statement, so only statements of that directory can load it.
            if obj is None or str(PurePosixPath(s.file).parent) != (obj.directory or "."):
                continue
            text = load_text(", ".join(names), obj)
            # The constructor goes with the statement (unpickling never calls it), and
            # what only it and the statement read (its helpers, its config, its
            # generator): without them the unit would grow the program and never be
            # tried.  The class stays: unpickling finds it by name.  Another statement
            # that still builds the class fails without ``__init__``; the oracle says so.
            init = None if obj.targets else _constructor(program, s.file, obj.cls, live)
            gone = frozenset({s.id} | (set(range(init, program.last[init] + 1)) if init is not None else set()))
            kept = names_read(text) | (set() if obj.targets else {obj.cls.split(".")[0]})
            unread = program.deps.dead_binders(cand, gone, kept, pure_only=False)
            while True:
                # What a dead helper's body reads (``phrase`` under ``build_splits``) goes
                # with it: the bodies of the dead definitions count as gone too.
                bodies = gone | unread | {
                    i for u in unread if isinstance(program.stmts[u].node, (cst.FunctionDef, cst.ClassDef))
                    for i in range(u, program.last[u] + 1)
                }
                more = program.deps.dead_binders(cand, frozenset(bodies), kept, pure_only=False)
                if more <= unread:
                    break
                unread = unread | more
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
            if t.parent == parent and t.id in live
            and isinstance(t.node, cst.FunctionDef) and t.node.name.value == "__init__"
        ),
        None,
    )
