"""Sizes computed from data become the numbers the run computed.

``max_len = xtr.size(1)`` and ``RopeLM(cfg, len(vocab.itos), max_len)`` keep the data
pipeline that built ``xtr`` and ``vocab`` alive, though the model needs only two numbers;
a maintainer's cut writes ``RopeLM(cfg, 37, 33)``.  The first run evaluated each size read
of the failing frames at the first error (``probe.sizes``); this pass offers, for each,
the literal in the expression's place, in the function the frame ran (every occurrence
there), and, when the object read was then read nowhere else, its binding's deletion in
the same unit (a second unit keeps it: building the object may be what the bug needs).

A name the scope binds once to a computed whole number (``max_len = max(len(x) for x in
ids)``) is recorded with its value too: its binding's value becomes the number
(``max_len = 9``), and ``propagate-constants`` then writes it where it is read.

A record of a function the program no longer has (``inline-calls`` put the body of
``run_epoch`` in ``main``, with its names) is looked for in every scope of its file.

Only where the value at the failure is the value at the read: the expression's root name
has one binding in its scope (a name rebound, ``x = self.emb(x)``, held another value
when the expression ran).  Inside a lambda, a comprehension or a nested definition a
name belongs to another scope, and nothing there is offered (the probe evaluates none).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, lone_assignment, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import header_parts, param_names, qualname_of

_OTHER_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.FunctionDef, cst.ClassDef)
_READS = (cst.Call, cst.Attribute, cst.Subscript)
_LITERALS = (cst.Integer, cst.Tuple, cst.UnaryOperation)


class ObservedSizes(LevelZeroPass):
    """``max_len = xtr.size(1)`` -> ``max_len = 33``, the size the run computed there."""

    name = "observed-sizes"
    # The candidates' nodes must be the program's own: an expression another edit already
    # replaced has no size read left in it.
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        if not program.facts.sizes:
            return []
        wanted: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        for record in program.facts.sizes:
            wanted[(record.file, record.function)][record.expression] = record.literal
        files = {file for file, _ in wanted}
        # Each statement's function, once: the orphans and the scan below both need it.
        functions = {s.id: qualname_of(program, s.id) for s in cand.editable() if s.file in files}
        orphans = _orphans(cand, wanted, functions)
        # (file, function, what) -> (literal, [(node replaced, its statement)])
        found: dict[tuple[str, str, str], tuple[str, list[tuple[cst.CSTNode, int]]]] = {}
        for s in cand.editable():
            if s.file not in files:
                continue
            function = functions[s.id]
            own = wanted.get((s.file, function), {})
            scope = {**orphans[s.file], **own} if s.file in orphans else own
            if not scope:
                continue
            assign = lone_assignment(s.node) if s.kind == "simple" else None
            if assign is not None and not isinstance(assign.value, _LITERALS):
                # ``max_len = max(len(x) for x in ids)``, ``step, (x, y) = next(...)``: the
                # names' values in the frame
                literal = _composed(assign.targets[0].target, scope)
                names = _names_under(assign.targets[0].target)
                if literal is not None and literal != code_of(assign.value).strip() and all(
                    _bindings(cand, s.id, function, n.value) == 1 for n in names
                ):
                    found[(s.file, function, code_of(assign.targets[0].target))] = (literal, [(assign.value, s.id)])
            for part in header_parts(s.node):
                for node in _reads_in(part, scope):
                    root = _root(node)
                    if root is None or _bindings(cand, s.id, function, root.value) > 1:
                        continue  # rebound in its scope: the failure's value may not be the read's
                    text = _normal(code_of(node))
                    found.setdefault((s.file, function, text), (scope[text], []))[1].append((node, s.id))
        out: list[Unit] = []
        for literal, where in found.values():
            replace = tuple(Edit("expr", node=program.node_index(n), text=literal) for n, _ in where)
            dead = _dead_roots(cand, where)
            for roots in ([dead] if dead else []) + [set()]:
                deletions = _deletions(cand, where, roots, literal)
                if deletions is not None and replace + deletions not in out:
                    out.append(replace + deletions)
        return out


def _orphans(
    cand: Candidate, wanted: dict[tuple[str, str], dict[str, str]], functions: dict[int, str]
) -> dict[str, dict[str, str]]:
    """Per file, the records of functions the program no longer has: ``run_epoch``'s
    ``for step, (x, y) in enumerate(loader)`` once ``inline-calls`` has put its body in
    ``main``.  Inlining keeps the body's names, so the expression is looked for in every
    scope of the file, under the same one-binding rule; an expression two orphaned
    functions recorded with different values is left out."""
    present = {(cand.program.stmts[sid].file, function) for sid, function in functions.items()}
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for (file, function), scope in wanted.items():
        if (file, function) in present:
            continue
        for expression, literal in scope.items():
            seen[file][expression].add(literal)
    return {
        file: {expression: next(iter(values)) for expression, values in scope.items() if len(values) == 1}
        for file, scope in seen.items()
    }


def _deletions(cand: Candidate, where, roots: set[int], literal: str) -> Unit | None:
    """Deleting ``roots`` (with what would be left reading nothing), and the plain
    bindings (imports, functions, literals) only the replaced expressions read; None
    when that would take a seeding statement."""
    program = cand.program
    deps = program.deps
    at = frozenset(sid for _, sid in where)
    closure = deps.deletion_closure(cand, roots, ignore=at) if roots else frozenset()
    replaced = {id(m) for n, _ in where for m in _names_under(n)}
    still = names_read(literal) | {
        m.value for sid in at for part in header_parts(program.stmts[sid].node)
        for m in _names_under(part) if id(m) not in replaced
    }
    # The statements the replacement edits count as gone for what they read: what else
    # they read is in ``still``, whose bindings stay.
    closure |= deps.dead_binders(cand, closure | at, still) - at
    if closure & program.protected:
        return None
    top = [sid for sid in closure if program.stmts[sid].parent not in closure]
    return tuple(Edit("delete", sid) for sid in sorted(top))


def _composed(target: cst.BaseExpression, scope: dict[str, str]) -> str | None:
    """The value a target's names held, written as the target is shaped: ``9`` for
    ``max_len``, ``(0, (torch.randn(64, 4, 128), torch.zeros(64, dtype=torch.int64)))`` for
    ``step, (x, y)``; None when a name has no record."""
    if isinstance(target, cst.Name):
        return scope.get(target.value)
    if isinstance(target, (cst.Tuple, cst.List)):
        parts = []
        for element in target.elements:
            if isinstance(element, cst.StarredElement):
                return None
            part = _composed(element.value, scope)
            if part is None:
                return None
            parts.append(part)
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return None


def _bindings(cand: Candidate, sid: int, function: str, name: str) -> int:
    """How many statements of the scope ``sid`` is in bind ``name`` (a parameter of the
    function counts as one)."""
    program = cand.program
    file = program.stmts[sid].file
    count = sum(
        1 for b in program.deps.binders_named.get(name, ())
        if program.stmts[b].file == file and qualname_of(program, b) == function
    )
    cur = program.stmts[sid].parent
    while cur is not None and not isinstance(program.stmts[cur].node, (cst.FunctionDef, cst.ClassDef)):
        cur = program.stmts[cur].parent
    if cur is not None and isinstance(program.stmts[cur].node, cst.FunctionDef):
        count += name in param_names(program.stmts[cur].node)
    return count


def _reads_in(node: cst.CSTNode, scope: dict[str, str]):
    """The outermost expressions under ``node`` whose text is a recorded size read, not
    looking into other scopes."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, _OTHER_SCOPES) or isinstance(cur, cst.AssignTarget):
            continue  # (``cfg.lr = 0.1`` assigns; only what is read becomes its value)
        if isinstance(cur, (cst.AugAssign, cst.AnnAssign)):
            if cur.value is not None:
                stack.append(cur.value)
            continue
        if isinstance(cur, _READS) and _normal(code_of(cur)) in scope:
            yield cur
            continue
        stack.extend(reversed(list(cur.children)))


@lru_cache(maxsize=4096)
def _normal(text: str) -> str | None:
    """The expression as ``ast.unparse`` writes it (what the probe recorded)."""
    try:
        return ast.unparse(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError):
        return None


def _root(node: cst.CSTNode) -> cst.Name | None:
    """The name a size read starts from: ``xtr`` in ``xtr.size(1)``, ``vocab`` in
    ``len(vocab.itos)``."""
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name):  # len(E)
            node = node.args[0].value
        else:
            node = node.func
    while True:
        if isinstance(node, cst.Name):
            return node
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func  # ``x.size()[1]``
        else:
            return None


def _dead_roots(cand: Candidate, where: list[tuple[cst.CSTNode, int]]) -> set[int]:
    """The bindings of the objects read whose every live read is one of ``where``'s: the
    statement ``xtr, ptr = to_tensor(...)`` once ``xtr.size(1)`` is ``33``, when nothing
    reads ``xtr`` or ``ptr`` otherwise."""
    program = cand.program
    deps = program.deps
    live = cand.live
    names = [m for n, _ in where for m in _names_under(n)]
    replaced = {id(m) for m in names}
    at = {sid for _, sid in where}
    binders = set()
    for m in names:
        binders |= deps.binders(m)
    dead = set()
    for b in binders:
        if b not in live or program.stmts[b].kind != "simple" or b in at:
            continue
        last = program.last[b]
        users = {u for u, _ in deps.users.get(b, ()) if u in live and not (b <= u <= last)}
        if not users or not users <= at:
            continue
        if all(id(n) in replaced for u in users for n in _names_from(program, u, b)):
            dead.add(b)
    return dead


def _names_under(node: cst.CSTNode) -> list[cst.Name]:
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Name):
            out.append(cur)
        stack.extend(cur.children)
    return out


def _names_from(program, sid: int, binder: int) -> list[cst.Name]:
    """The names statement ``sid`` reads from the binding ``binder``."""
    deps = program.deps
    out = []
    for part in header_parts(program.stmts[sid].node):
        stack = [part]
        while stack:
            cur = stack.pop()
            if isinstance(cur, cst.Name) and binder in deps.binders(cur):
                out.append(cur)
            stack.extend(cur.children)
    return out
