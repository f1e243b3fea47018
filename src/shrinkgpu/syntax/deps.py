"""Statement-level dependencies of a program, computed once per original.

Two relations, both approximations that only steer the search (the oracle still
judges every candidate):

``needs``       for each name a statement reads, the statements that may bind it (any one
                of them suffices).  Deleting a statement together with everything whose
                needs it leaves unmet gives candidates that do not just die of
                ``NameError`` -- the brief measured 40-59% of general reducers' time lost
                to those.
``influences``  a superset for slicing backwards from the failing statement: the binders
                above, plus statements that mutate a name the statement reads
                (``x.append(...)``, ``x[i] = ...``, ``x.attr = ...``) and statements that
                write an attribute it reads.

Name resolution uses libcst's ScopeProvider, so function locals, closures, class
bodies and comprehensions resolve as Python resolves them.  The graph is kept in
networkx for the slice (a reverse reachability query).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Protocol

import libcst as cst
from libcst.metadata import (
    Assignment,
    MetadataWrapper,
    PositionProvider,
    ScopeProvider,
)

from shrinkgpu.syntax.edits import Stmt

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["SEEDING_CALLS", "Dependencies", "Enclosing", "Indexed", "Live", "Span", "is_seeding", "mutated_names"]


# A ``Program`` and a ``Candidate`` (syntax.program) as this module reads them: the
# program builds its dependencies, so program.py imports this module, never the reverse.
class Indexed(Protocol):
    modules: dict[str, cst.Module]
    stmts: list[Stmt]
    by_node: dict[int, int]
    children: dict[int | None, list[int]]
    last: list[int]

    def stmts_in_file(self, path: str) -> list[int]: ...

    def seeds_unused_generator(self, sid: int) -> bool: ...


class Live(Protocol):
    @property
    def live(self) -> frozenset[int]: ...


# Calls whose only effect is on global random state: a slice keeps them, because the
# failing tensors usually come from seeded random data.
SEEDING_CALLS = frozenset(
    {"manual_seed", "seed", "set_seed", "seed_everything", "manual_seed_all", "use_deterministic_algorithms",
     "set_rng_state", "setstate"}
)


@dataclass(frozen=True)
class Span:
    file: str
    start: int
    end: int


class Enclosing(cst.CSTVisitor):
    """Maps every node to the innermost statement (of the program's table) around it."""

    def __init__(self, program: Indexed):
        self.program = program
        self.stack: list[int] = []
        self.of: dict[int, int] = {}
        self.attribute_of: dict[int, cst.Attribute] = {}  # id(x) -> the ``x.attr`` around it
        self.in_fstring: set[int] = set()  # ids of nodes inside an f-string
        self.del_targets: set[int] = set()
        self._fstrings = 0
        self.call_of: dict[int, cst.Call] = {}  # id(f) -> the ``f(...)`` it is the callee of

    def on_visit(self, node: cst.CSTNode) -> bool:
        sid = self.program.by_node.get(id(node))
        if sid is not None:
            self.stack.append(sid)
        if self.stack:
            self.of[id(node)] = self.stack[-1]
        if isinstance(node, cst.Attribute):
            self.attribute_of[id(node.value)] = node
        elif isinstance(node, cst.Call):
            self.call_of[id(node.func)] = node
        elif isinstance(node, cst.FormattedString):
            self._fstrings += 1
        elif isinstance(node, cst.Del):
            for t in _flatten_targets(node.target):
                self.del_targets.add(id(t))
        if self._fstrings:
            self.in_fstring.add(id(node))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self.program.by_node.get(id(original_node)) is not None:
            self.stack.pop()
        if isinstance(original_node, cst.FormattedString):
            self._fstrings -= 1


def _base_name(node: cst.BaseExpression) -> str | None:
    """``x`` for ``x``, ``x.a.b``, ``x[i]``, ``x.a[i]``."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _stored_targets(stmt: cst.CSTNode) -> list[cst.BaseExpression]:
    targets: list[cst.BaseExpression] = []
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                targets += [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets.append(small.target)
    return targets


def _flatten_targets(node: cst.BaseExpression) -> Iterable[cst.BaseExpression]:
    if isinstance(node, (cst.Tuple, cst.List)):
        for el in node.elements:
            yield from _flatten_targets(el.value)
    elif isinstance(node, cst.StarredElement):
        yield from _flatten_targets(node.value)
    else:
        yield node


def mutated_names(stmt: cst.CSTNode) -> set[str]:
    """Names whose object a simple statement (probably) changes in place."""
    out: set[str] = set()
    if not isinstance(stmt, cst.SimpleStatementLine):
        return out
    for target in _stored_targets(stmt):
        for t in _flatten_targets(target):
            if isinstance(t, (cst.Attribute, cst.Subscript)):
                name = _base_name(t)
                if name:
                    out.add(name)
    for small in stmt.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute):
                name = _base_name(func.value)
                if name:
                    out.add(name)
    return out


def _written_attributes(stmt: cst.CSTNode) -> set[str]:
    out = set()
    for target in _stored_targets(stmt):
        for t in _flatten_targets(target):
            if isinstance(t, cst.Attribute):
                out.add(t.attr.value)
    return out


class _AttributeReads(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.names.add(node.attr.value)


_LITERALS = (
    cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.List, cst.Tuple, cst.Dict,
    cst.Set, cst.Name,
)


def _pure_binder(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return not stmt.decorators
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            return True
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and isinstance(small.value, _LITERALS):
            return True
    return False


def is_seeding(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call):
            func = value.func
            name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if name in SEEDING_CALLS:
                return True
    return False


class Dependencies:
    def __init__(self, program: Indexed):
        self.program = program
        n = len(program.stmts)
        needs: list[list[frozenset[int]]] = [[] for _ in range(n)]
        influences: list[set[int]] = [set() for _ in range(n)]
        self.spans: list[Span | None] = [None] * n
        self._enclosing_of: dict[int, int] = {}
        self._call_of: dict[int, cst.Call] = {}
        self._attribute_of: dict[int, cst.Attribute] = {}
        self._in_fstring: set[int] = set()
        self._del_targets: set[int] = set()
        self._binders_of: dict[int, frozenset[int]] = {}  # id(name node read) -> binding statements
        self._name_readers: dict[tuple[int, str], set[int]] = defaultdict(set)  # (binder, name) -> readers
        self._name_reads: dict[tuple[int, str], list[cst.Name]] = defaultdict(list)  # ... -> the Name nodes
        self.binders_named: dict[str, set[int]] = defaultdict(set)  # name -> statements binding it
        mutators_by_file: dict[tuple[str, str], set[int]] = defaultdict(set)
        # binder statement -> [(name node read, the ``name.attr`` around it or None)] for
        # reads that only this statement can satisfy
        self.sole_readers: dict[int, list[tuple[cst.Name, cst.Attribute | None]]] = defaultdict(list)
        self.stored_attribute_bases: dict[str, set[str]] = defaultdict(set)  # file -> names x in ``x.a = ...``
        attr_writers: dict[str, set[int]] = defaultdict(set)
        reads_names: list[set[str]] = [set() for _ in range(n)]

        for path, module in program.modules.items():
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            scopes = wrapper.resolve(ScopeProvider)
            positions = wrapper.resolve(PositionProvider)
            enclosing = Enclosing(program)
            module.visit(enclosing)
            of = enclosing.of
            self._enclosing_of.update(of)
            self._call_of.update(enclosing.call_of)
            self._attribute_of.update(enclosing.attribute_of)
            self._in_fstring |= enclosing.in_fstring
            self._del_targets |= enclosing.del_targets
            for sid in program.stmts_in_file(path):
                node = program.stmts[sid].node
                pos = positions.get(node)
                if pos is not None:
                    self.spans[sid] = Span(path, pos.start.line, pos.end.line)
                for name in mutated_names(node):
                    mutators_by_file[(path, name)].add(sid)
                for attr in _written_attributes(node):
                    attr_writers[attr].add(sid)
                for target in _stored_targets(node):
                    for t in _flatten_targets(target):
                        if isinstance(t, (cst.Attribute, cst.Subscript)):
                            base = _base_name(t)
                            if base:
                                self.stored_attribute_bases[path].add(base)
            for scope in {s for s in scopes.values() if s is not None}:
                for assignment in scope.assignments:
                    if isinstance(assignment, Assignment):
                        b = of.get(id(assignment.node))
                        if b is not None:
                            self.binders_named[assignment.name].add(b)
                for access in scope.accesses:
                    user = of.get(id(access.node))
                    if user is None:
                        continue
                    providers = set()
                    for ref in access.referents:
                        if isinstance(ref, Assignment):
                            p = of.get(id(ref.node))
                            if p is not None:
                                providers.add(p)
                    read = getattr(access.node, "value", None)
                    if isinstance(read, str):
                        reads_names[user].add(read)
                    if providers:
                        self._binders_of[id(access.node)] = frozenset(providers)
                        if isinstance(read, str):
                            for p in providers:
                                self._name_readers[(p, read)].add(user)
                                if isinstance(access.node, cst.Name):
                                    self._name_reads[(p, read)].append(access.node)
                        needs[user].append(frozenset(providers))
                        influences[user] |= providers
                    if len(providers) == 1 and len(access.referents) == 1 and isinstance(access.node, cst.Name):
                        (binder,) = providers
                        self.sole_readers[binder].append(
                            (access.node, enclosing.attribute_of.get(id(access.node)))
                        )

        for sid, stmt in enumerate(program.stmts):
            path = stmt.file
            for name in reads_names[sid]:
                influences[sid] |= mutators_by_file.get((path, name), set())
            if stmt.kind == "simple":
                reader = _AttributeReads()
                stmt.node.visit(reader)
                for attr in reader.names:
                    influences[sid] |= attr_writers.get(attr, set())
            influences[sid].discard(sid)

        self._mutators = mutators_by_file
        self._attr_writers = dict(attr_writers)
        self.needs: list[tuple[frozenset[int], ...]] = [tuple(set(g)) for g in needs]
        self.influences: list[frozenset[int]] = [frozenset(s) for s in influences]
        # provider -> [(user, group index)] so that closures cost O(edges)
        users: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for user, groups in enumerate(self.needs):
            for gi, group in enumerate(groups):
                for p in group:
                    users[p].append((user, gi))
        self.users = dict(users)

    @cached_property
    def slice_graph(self) -> nx.DiGraph:
        """What a statement may depend on, as a graph over (statement, mode) nodes.

        ``part``: the statement is needed, but of its children only those something
        needs (the enclosing loop of the failing line, say).  ``whole``: everything in
        it is needed (a function or class that a needed statement uses: which of its
        statements matter is not visible from outside).  A needed statement needs its
        parent (``part``), the statements it reads from or that mutate what it reads
        (``part``, or ``whole`` for functions and classes).  Reachability from the
        seeds is the slice.
        """
        # networkx takes longer to import than the rest of the package: only a slice needs it.
        import networkx as nx

        program = self.program
        g = nx.DiGraph()
        for s in program.stmts:
            for mode in ("part", "whole"):
                node = (s.id, mode)
                g.add_node(node)
                if s.parent is not None:
                    g.add_edge(node, (s.parent, "part"))
                for p in self.influences[s.id]:
                    kind = program.stmts[p].kind
                    g.add_edge(node, (p, "whole" if kind in ("def", "class") else "part"))
            for c in program.children.get(s.id, ()):
                g.add_edge((s.id, "whole"), (c, "part" if program.stmts[c].kind == "simple" else "whole"))
        return g

    # -- queries --------------------------------------------------------------------
    def readers(self, sid: int, name: str) -> set[int]:
        """Statements that read ``name`` as bound by statement ``sid``."""
        return self._name_readers.get((sid, name), set())

    def mutated(self, file: str, name: str) -> bool:
        """Whether some statement changes the object ``name`` refers to in place."""
        return bool(self._mutators.get((file, name)))

    def in_fstring(self, node: cst.CSTNode) -> bool:
        return id(node) in self._in_fstring

    def is_del_target(self, node: cst.CSTNode) -> bool:
        return id(node) in self._del_targets

    def call_of(self, func: cst.CSTNode) -> cst.Call | None:
        """The call whose callee is ``func``, if it is one."""
        return self._call_of.get(id(func))

    def attribute_around(self, node: cst.CSTNode) -> cst.Attribute | None:
        """The ``node.attr`` whose value ``node`` is, if it is one."""
        return self._attribute_of.get(id(node))

    def attribute_written(self, attr: str) -> bool:
        """Whether some statement stores to an attribute named ``attr`` (``x.attr = v``)."""
        return bool(self._attr_writers.get(attr))

    def reads(self, sid: int, name: str) -> list[cst.Name]:
        """The Name nodes that read ``name`` as bound by statement ``sid``."""
        return self._name_reads.get((sid, name), [])

    def binders(self, name: cst.CSTNode) -> frozenset[int]:
        """The statements that may bind the name read at ``name``."""
        return self._binders_of.get(id(name), frozenset())

    def enclosing(self, node: cst.CSTNode) -> int | None:
        return self._enclosing_of.get(id(node))

    def enclosing_live(self, node: cst.CSTNode, live: frozenset[int]) -> bool:
        sid = self._enclosing_of.get(id(node))
        return sid is not None and sid in live

    def statement_at(self, file: str, line: int) -> int | None:
        """The innermost statement of ``file`` whose lines contain ``line``."""
        best, best_lines = None, 0
        for sid in self.program.stmts_in_file(file):
            span = self.spans[sid]
            if span is not None and span.start <= line <= span.end:
                if best is None or (span.end - span.start) <= best_lines:
                    best, best_lines = sid, span.end - span.start
        return best

    def deletion_closure(
        self, cand: Live, roots: Iterable[int], ignore: frozenset[int] = frozenset()
    ) -> frozenset[int]:
        """``roots``, their descendants, and every live statement left with a read that
        nothing binds any more -- except ``ignore``, statements whose reads another edit
        of the same unit removes."""
        live = cand.live
        stmts = self.program.stmts
        children = self.program.children
        deleted: set[int] = set()
        queue = [r for r in roots if r in live]
        while queue:
            s = queue.pop()
            if s in deleted:
                continue
            deleted.add(s)
            queue.extend(c for c in children.get(s, ()) if c in live)
            for user, gi in self.users.get(s, ()):
                if user in deleted or user not in live or user in ignore:
                    continue
                if all(p in deleted or p not in live for p in self.needs[user][gi]):
                    queue.append(user)
            # A loop, ``with`` or ``if`` left with nothing inside goes too: ``for k in d:
            # pass`` is never what a maintainer wants to read.
            parent = stmts[s].parent
            if (
                parent is not None
                and parent not in deleted
                and parent not in ignore
                and stmts[parent].kind in ("for", "while", "with", "if")
                and all(c in deleted or c not in live for c in children.get(parent, ()))
            ):
                queue.append(parent)
        return frozenset(deleted)

    def dead_binders(
        self, cand: Live, deleted: frozenset[int], still_read: Iterable[str] = (), pure_only: bool = True
    ) -> frozenset[int]:
        """Statements that only bind names no surviving statement reads once ``deleted``
        is gone (``DEFAULTS = {...}`` after the parser that read it): plain bindings of
        literals, functions, classes and imports, whose removal cannot change behaviour.
        With ``pure_only=False`` any binding (``trainer = Trainer(...)``) counts: for a
        unit whose test decides whether its side effects mattered."""
        live = cand.live
        stmts = self.program.stmts
        dead: set[int] = set()
        changed = True
        gone = set(deleted)
        # Names that new text of the same unit reads keep their bindings.
        kept = set().union(*(self.binders_named.get(n, set()) for n in still_read)) if still_read else set()
        while changed:
            changed = False
            for s in list(gone):
                for group in self.needs[s]:
                    for p in group:
                        if p in gone or p in kept or p not in live or (pure_only and not _pure_binder(stmts[p].node)):
                            continue
                        # Readers inside the binder (a def reading its own parameters)
                        # do not keep it alive, nor do readers an edit of the candidate
                        # already deleted; one outside must exist and be gone.
                        last = self.program.last[p]
                        readers = {u for u, _ in self.users.get(p, ()) if not (p <= u <= last) and u in live}
                        if readers and readers <= gone:
                            gone.add(p)
                            dead.add(p)
                            changed = True
        return frozenset(dead)

    def backward_slice(self, cand: Live, seeds: Iterable[int]) -> frozenset[int]:
        """Statements the seeds may depend on (see ``slice_graph``), plus every seeding
        call and what it depends on."""
        program = self.program
        live = cand.live
        starts = {(s, "part") for s in seeds if s in live}
        starts |= {
            (s.id, "part")
            for s in program.stmts
            if s.id in live and is_seeding(s.node) and not program.seeds_unused_generator(s.id)
        }
        import networkx as nx  # (see slice_graph)

        reached = set(starts)
        graph = self.slice_graph
        for node in starts:
            reached |= nx.descendants(graph, node)
        keep = {sid for sid, _ in reached if sid in live}
        return frozenset(keep)
