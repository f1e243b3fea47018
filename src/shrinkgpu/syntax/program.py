"""Programs as an immutable original plus a set of edits.

The original files are parsed once with libcst and every statement gets an integer id
(document order).  A ``Candidate`` is that original with a frozen set of ``Edit``s; it
renders by walking the original tree with a transformer that looks each original node up
by identity.  Nothing is ever mutated, so any two edit sets can be rendered, compared or
merged, and the text of every statement that survives is the user's own, comments and
formatting included.

The edits themselves, and what each does, are described in syntax/edits.py.
"""

from __future__ import annotations

import io
import tokenize
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import libcst as cst

from shrinkgpu.syntax.code import code_of, parse_expression
from shrinkgpu.syntax.deps import Dependencies, Enclosing
from shrinkgpu.syntax.edits import BODY_BRANCHES, STRUCTURAL, Edit, Stmt, import_targets
from shrinkgpu.syntax.facts import CutRecord, Facts, LoadRecord, ParseRecord, SavedObject, loop_facts, loop_header
from shrinkgpu.syntax.render import render_all
from shrinkgpu.syntax.tokens import count_tokens, measure

# The program and its candidates live here; statements and edits (edits), what a run
# showed (facts) and source text (code) have modules of their own, re-exported for
# callers.
__all__ = [
    "BODY_BRANCHES", "Candidate", "CutRecord", "Edit", "Facts", "LoadRecord", "ParseRecord", "Program", "STRUCTURAL",
    "SavedObject", "Stmt",
    "code_of", "import_targets", "inline_candidates", "loop_facts", "loop_header", "parse_expression",
    "statements_of",
]

# What one level of nesting costs, in tokens, when candidates are compared: a loop
# replaced by its first iteration (``x = next(iter(it))``) is a few tokens longer than
# the loop header, and flatter is what a maintainer reads best.
BLOCK_COST = 5
# A loop on top of its block: a maintainer reads straight-line steps far more easily,
# and ``x = next(itertools.islice(loader, 3, None))`` should beat ``for x in loader:``.
LOOP_COST = 10
# Each file beyond the main one: a single self-contained script is what a maintainer
# wants, and an empty ``pkg/__init__.py`` left behind has no tokens to count.
FILE_COST = 10
# The statement where the user's code hands control to a framework (``trainer.fit(...)``,
# the library cut's source) runs at least the loops of epochs and batches, which the
# reader cannot see: it costs those two loops and their blocks on top of its tokens.
# Without it the direct call, whose arguments a loaded file carries and the search
# counts, could cost as much as the framework it replaces, and the framework would stay.
FRAMEWORK_COST = 2 * (LOOP_COST + BLOCK_COST)

_KINDS: tuple[tuple[type, str], ...] = (
    (cst.SimpleStatementLine, "simple"),
    (cst.FunctionDef, "def"),
    (cst.ClassDef, "class"),
    (cst.If, "if"),
    (cst.For, "for"),
    (cst.While, "while"),
    (cst.With, "with"),
    (cst.Try, "try"),
    (cst.TryStar, "try"),
    (cst.Match, "match"),
)

class Program:
    """The immutable original: files, parse trees and the statement table."""

    def __init__(self, files: Mapping[str, str], main: str, facts: Facts | None = None):
        if main not in files:
            raise ValueError(f"the main file {main!r} is not among the program's files")
        self.main = main
        self.facts = facts or Facts()
        self.texts: dict[str, str] = dict(files)
        self.modules: dict[str, cst.Module] = {}
        for path, text in self.texts.items():
            try:
                self.modules[path] = cst.parse_module(text)
            except cst.ParserSyntaxError as exc:
                raise SyntaxError(f"{path}: {exc}") from exc
        self.stmts: list[Stmt] = []
        self.by_node: dict[int, int] = {}
        self.children: dict[int | None, list[int]] = {}
        for path, module in self.modules.items():
            _Indexer(self, path, module).index()
        self._by_file: dict[str, list[int]] = {}
        for st in self.stmts:
            self._by_file.setdefault(st.file, []).append(st.id)
        # Ids are assigned in pre-order, so a statement's descendants are the ids
        # (sid, last[sid]]: "is anything inside edited" is one range query.
        self.last: list[int] = list(range(len(self.stmts)))
        for st in reversed(self.stmts):
            if st.parent is not None:
                self.last[st.parent] = max(self.last[st.parent], self.last[st.id])
        self.nodes: list[cst.CSTNode] = []
        self.node_ids: dict[int, int] = {}

    def initial(self) -> "Candidate":
        return Candidate(self, frozenset())

    @cached_property
    def enclosing(self) -> dict[int, int]:
        """id(node) -> the innermost statement around it, for every node."""
        out: dict[int, int] = {}
        for module in self.modules.values():
            visitor = Enclosing(self)
            module.visit(visitor)
            out.update(visitor.of)
        return out

    @cached_property
    def top_code(self) -> dict[int, str]:
        """id(top-level statement) -> its text, so unchanged ones are not generated again."""
        out: dict[int, str] = {}
        for module in self.modules.values():
            for stmt in module.body:
                out[id(stmt)] = module.code_for_node(stmt)
        return out

    def stmt_code(self, sid: int) -> str:
        st = self.stmts[sid]
        return self.modules[st.file].code_for_node(st.node)

    def node_code(self, idx: int) -> str:
        node = self.nodes[idx]
        if isinstance(node, cst.Annotation):
            # Its indicator (``:`` or ``->``) is written by the node that holds it.
            return ": " + cst.Module(body=[]).code_for_node(node.annotation)
        return cst.Module(body=[]).code_for_node(node)

    def stmts_in_file(self, path: str) -> list[int]:
        return self._by_file.get(path, [])

    def node_index(self, node: cst.CSTNode) -> int:
        """A stable index for an original node that an ``expr`` edit targets."""
        idx = self.node_ids.get(id(node))
        if idx is None:
            idx = len(self.nodes)
            self.nodes.append(node)
            self.node_ids[id(node)] = idx
        return idx

    @cached_property
    def deps(self) -> Dependencies:
        return Dependencies(self)

    @cached_property
    def protected(self) -> frozenset[int]:
        """Statements no pass may remove: the ones that seeded a random generator in the
        run, and the calls that led to them."""
        return self._seed_statements(innermost_only=False)

    @cached_property
    def seeding(self) -> frozenset[int]:
        """The seeding calls themselves, whose expressions must stay as they are."""
        return self._seed_statements(innermost_only=True)

    def _seed_statements(self, innermost_only: bool) -> frozenset[int]:
        out = set()
        for file, line, innermost in self.facts.seed_sites:
            if innermost_only and not innermost:
                continue
            sid = self.deps.statement_at(file, line)
            if sid is not None and not (innermost and self.seeds_unused_generator(sid)):
                out.add(sid)
        return frozenset(out)

    def seeds_unused_generator(self, sid: int) -> bool:
        """``random.seed(0)`` (or ``np.random.seed(0)``) in a program that never again
        mentions ``random`` (``np``): nothing the script does draws from that generator,
        so the seeding is as removable as any other statement.  A library drawing from it
        behind the script's back would make candidates flaky, which confirmation runs
        catch; torch's own seeding always stays (every torch op may draw from it)."""
        code = self.stmt_code(sid).strip()
        seedings = (("random.seed(", "random"), ("np.random.seed(", "np"), ("numpy.random.seed(", "numpy"))
        module = next((module for prefix, module in seedings if code.startswith(prefix)), None)
        if module is None:
            return False
        uses = self._bare_name_uses.get(module)
        if uses is None:
            return False  # a file that does not tokenize: keep the seeding
        # The seeding call itself and the import that binds the name.
        return uses <= 2

    @cached_property
    def loop_iterations(self) -> dict[int, int]:
        """``for`` statement -> the iteration the original failed in, for loops the facts
        name by a header that occurs once in its file."""
        wanted: dict[tuple[str, str], int] = {}
        for file, header, iteration in self.facts.loops:
            wanted[(file, header)] = iteration
        if not wanted:
            return {}
        found: dict[tuple[str, str], list[int]] = {}
        for s in self.stmts:
            if s.kind == "for":
                found.setdefault((s.file, loop_header(s.node)), []).append(s.id)
        return {sids[0]: wanted[key] for key, sids in found.items() if key in wanted and len(sids) == 1}

    @cached_property
    def _bare_name_uses(self) -> dict[str, int]:
        """How often ``random``, ``np`` and ``numpy`` are read as plain names (not as
        attributes) in the program's files, counted once per program."""
        counts = {"random": 0, "np": 0, "numpy": 0}
        for path, text in self.texts.items():
            if not path.endswith(".py"):
                continue
            try:
                tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
            except (tokenize.TokenError, SyntaxError, IndentationError):
                return {}
            for k, t in enumerate(tokens):
                if t.type == tokenize.NAME and t.string in counts and not (k and tokens[k - 1].string == "."):
                    counts[t.string] += 1
        return counts

    def local_module_names(self) -> dict[str, str]:
        """Importable name -> file, for the program's files other than the main one."""
        out = {}
        for path in self.texts:
            if path == self.main or not path.endswith(".py"):
                continue
            name = path[:-3].replace("/", ".")
            if name.endswith(".__init__"):
                name = name[: -len(".__init__")]
            out[name] = path
        return out


class _Indexer(cst.CSTVisitor):
    def __init__(self, program: Program, path: str, module: cst.Module):
        self.program = program
        self.path = path
        self.module = module
        # (statement id, node, branch currently being visited)
        self.stack: list[list] = [[None, None, "body"]]

    def index(self) -> None:
        self.module.visit(self)

    def on_visit(self, node: cst.CSTNode) -> bool:
        top = self.stack[-1]
        if isinstance(node, cst.BaseStatement):
            kind = next((k for t, k in _KINDS if isinstance(node, t)), "other")
            branch = top[2]
            if kind == "if" and isinstance(top[1], cst.If) and top[1].orelse is node:
                kind, branch = "elif", "orelse"
            program = self.program
            sid = len(program.stmts)
            depth = sum(1 for entry in self.stack if entry[0] is not None)
            program.stmts.append(
                Stmt(
                    id=sid,
                    file=self.path,
                    node=node,
                    parent=top[0],
                    branch=branch if top[0] is not None else None,
                    kind=kind,
                    depth=depth,
                    size=count_tokens(self.module.code_for_node(node)),
                )
            )
            program.by_node[id(node)] = sid
            program.children.setdefault(top[0], []).append(sid)
            self.stack.append([sid, node, "body"])
            return kind != "simple"  # nothing inside a simple line is a statement
        if isinstance(node, cst.Else):
            top[2] = "orelse"
        elif isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)):
            top[2] = "handlers"
        elif isinstance(node, cst.Finally):
            top[2] = "finalbody"
        elif isinstance(node, cst.MatchCase):
            top[2] = "cases"
        elif isinstance(node, cst.BaseExpression):
            return False  # no statements inside expressions
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, cst.BaseStatement):
            self.stack.pop()
        elif isinstance(original_node,
                        (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
            self.stack[-1][2] = "body"


class Candidate:
    """The original program with a set of edits applied.  Immutable; renders lazily."""

    __slots__ = ("program", "edits", "__dict__")

    def __init__(self, program: Program, edits: frozenset[Edit]):
        self.program = program
        self.edits = edits

    def with_edits(self, edits: Iterable[Edit]) -> "Candidate":
        new = frozenset(edits)
        if not new:
            return self
        replaced = {e.stmt for e in new if e.op == "replace"}
        exprs = {e.node for e in new if e.op in ("expr", "remove")}
        kept = self.edits
        if replaced or exprs:
            kept = frozenset(
                e for e in kept
                if not (e.op == "replace" and e.stmt in replaced)
                and not (e.op in ("expr", "remove") and e.node in exprs)
            )
        return Candidate(self.program, kept | new)

    # -- structure --------------------------------------------------------------------
    @cached_property
    def edit_of(self) -> dict[int, Edit]:
        """The structural edit of each statement that has one (``delete`` wins)."""
        out: dict[int, Edit] = {}
        for e in sorted(self.edits):
            if e.stmt < 0 or e.op not in STRUCTURAL:
                continue
            if e.stmt not in out or e.op == "delete":
                out[e.stmt] = e
        return out

    # Two edits for one target can meet in one candidate (units of one ddmin step); the
    # sorted order makes the winner the same in every process (sets of strings iterate
    # in an order that changes with the hash seed).
    @cached_property
    def replacement_of(self) -> dict[int, Edit]:
        return {e.stmt: e for e in sorted(self.edits) if e.op == "replace"}

    @cached_property
    def expr_of(self) -> dict[int, Edit]:
        return {e.node: e for e in sorted(self.edits) if e.op in ("expr", "remove")}

    @cached_property
    def dropped_files(self) -> frozenset[str]:
        gone = {e.file for e in self.edits if e.op == "drop"}
        gone |= {e.file for e in self.edits if e.op == "inline" and self._stmt_live_raw(e.stmt)}
        return frozenset(gone)

    def _stmt_live_raw(self, sid: int) -> bool:
        return sid in self.live

    @cached_property
    def live(self) -> frozenset[int]:
        """Statements that are still part of the program (possibly hoisted)."""
        program = self.program
        edit_of = self.edit_of
        drops = {e.file for e in self.edits if e.op == "drop"}
        alive: set[int] = set()
        for s in program.stmts:  # parents come before their children
            if s.file in drops:
                continue
            e = edit_of.get(s.id)
            if e is not None and e.op == "delete":
                continue
            if s.parent is None:
                alive.add(s.id)
                continue
            if s.parent not in alive:
                continue
            pe = edit_of.get(s.parent)
            if s.parent in self.replacement_of:
                continue  # its parent was replaced by new text
            if pe is None or pe.op == "inline":
                alive.add(s.id)
            elif pe.op == "body" and s.branch in BODY_BRANCHES.get(program.stmts[s.parent].kind, ()):
                alive.add(s.id)
            elif pe.op == "else" and s.branch == "orelse":
                alive.add(s.id)
        return frozenset(alive)

    def editable(self) -> list[Stmt]:
        """Live statements without an edit of their own, in document order."""
        live, edit_of = self.live, self.edit_of
        return [s for s in self.program.stmts if s.id in live and s.id not in edit_of]

    def depth(self, sid: int) -> int:
        """Nesting depth as rendered: hoisted ancestors no longer nest."""
        stmts, edit_of = self.program.stmts, self.edit_of
        d, cur = 0, stmts[sid].parent
        while cur is not None:
            e = edit_of.get(cur)
            nests = e is None or e.op not in ("body", "else")
            if stmts[cur].kind == "elif":
                # An elif is written at its chain's level, not inside it -- unless its
                # chain was replaced by its else branch and it became an ``if`` itself.
                parent = stmts[cur].parent
                head = edit_of.get(parent) if parent is not None else None
                nests = nests and head is not None and head.op == "else"
            if nests:
                d += 1
            cur = stmts[cur].parent
        return d

    # -- rendering --------------------------------------------------------------------
    @cached_property
    def files(self) -> dict[str, str]:
        """Rendered program: path -> source, without dropped or inlined files."""
        rendered = render_all(self)
        return {p: t for p, t in rendered.items() if p not in self.dropped_files}

    @cached_property
    def _measures(self) -> tuple[int, int, int, int]:
        totals = [0, 0, 0, 0]
        for text in self.files.values():
            for k, value in enumerate(measure(text)):
                totals[k] += value
        return totals[0], totals[1], totals[2], totals[3]

    @cached_property
    def size(self) -> int:
        return self._measures[0]

    @cached_property
    def magnitude(self) -> int:
        """Sum of the integer literals (each capped): the tie-breaker that lets
        ``range(3)`` -> ``range(1)`` count as progress at equal token count."""
        return self._measures[3]

    @cached_property
    def blocks(self) -> int:
        return self._measures[1]

    @cached_property
    def loops(self) -> int:
        return self._measures[2]

    @cached_property
    def order(self) -> tuple[int, int]:
        """What the search minimises: tokens plus a cost per nested block, per loop, per
        file beyond the main one and per file it loads (with what that file carries:
        ``syntax.facts.loaded_cost``), and for the framework's entry while it stays, then
        the magnitude of constants."""
        extra_files = max(0, sum(1 for path in self.files if path.endswith(".py")) - 1)
        # A file it loads is a file beyond the main one too, and counts what it carries
        loaded = sum(FILE_COST + cost for name, cost in self.program.facts.loaded
                     if any(name in text for text in self.files.values()))
        cut = self.program.facts.cut
        framework = FRAMEWORK_COST if cut is not None and cut.source in self.files.get(cut.file, "") else 0
        return (self.size + BLOCK_COST * self.blocks + LOOP_COST * self.loops + FILE_COST * extra_files + loaded
                + framework, self.magnitude)

    @cached_property
    def key(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.files.items()))

    def __repr__(self) -> str:
        return f"Candidate({sorted(self.edits)!r})"


def inline_candidates(cand: Candidate) -> list[tuple[Stmt, str]]:
    """Live import lines of a local module that could be replaced by the module."""
    local = cand.program.local_module_names()
    out = []
    for s in cand.editable():
        if s.kind != "simple":
            continue
        target = import_targets(s.node, s.file)
        if target is None:
            continue
        module, names = target
        path = local.get(module)
        if path is None or path == s.file or path in cand.dropped_files:
            continue
        if not names and "." in module:
            continue  # ``import pkg.mod``: attribute chains we do not rewrite
        out.append((s, path))
    return out


def statements_of(cand: Candidate, kinds: Sequence[str] | None = None) -> list[Stmt]:
    stmts = cand.editable()
    if kinds is not None:
        stmts = [s for s in stmts if s.kind in kinds]
    return stmts
