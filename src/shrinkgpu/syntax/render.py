"""Rendering a candidate: the original trees walked with its edits applied.

This is the reducer's hottest loop (once per candidate).  ``Candidate.files`` calls
``render_all``; the rest is the renderer's own.
"""

from __future__ import annotations

import bisect
from graphlib import CycleError, TopologicalSorter
from typing import Mapping, Protocol

import libcst as cst

from shrinkgpu.syntax.code import parse_expression
from shrinkgpu.syntax.edits import PASS_LINE, Edit, Stmt, import_targets

__all__ = ["Edited", "Original", "render_all"]


# A ``Program`` and a ``Candidate`` (syntax.program) as the renderer reads them: a
# candidate renders itself, so program.py imports this module, never the reverse.
class Original(Protocol):
    main: str
    texts: dict[str, str]
    modules: dict[str, cst.Module]
    stmts: list[Stmt]
    by_node: dict[int, int]
    last: list[int]
    nodes: list[cst.CSTNode]
    node_ids: dict[int, int]

    @property
    def enclosing(self) -> dict[int, int]: ...

    @property
    def top_code(self) -> dict[int, str]: ...


class Edited(Protocol):
    @property
    def program(self) -> Original: ...

    @property
    def edits(self) -> frozenset[Edit]: ...

    @property
    def edit_of(self) -> dict[int, Edit]: ...

    @property
    def expr_of(self) -> dict[int, Edit]: ...

    @property
    def replacement_of(self) -> dict[int, Edit]: ...


def render_all(cand: Edited) -> dict[str, str]:
    """Render every file.  This is the reducer's hottest loop (once per candidate), so it
    does as little as libcst allows: files without edits are returned as they are, the
    transformer only descends into statements that hold an edit, and unchanged top-level
    statements reuse their original text instead of being generated again."""
    program = cand.program
    dirty = _dirty_statements(cand)
    order = sorted(program.modules, key=lambda p: (p == program.main, p))
    trees: dict[str, cst.Module] = {}
    texts: dict[str, str] = {}
    for path in _inline_order(cand, order):
        module = program.modules[path]
        file_dirty = dirty.get(path, frozenset())
        if not file_dirty:
            trees[path], texts[path] = module, program.texts[path]
            continue
        renderer = _Renderer(cand, path, trees, sorted(file_dirty))
        tree = module.visit(renderer)
        trees[path] = tree
        texts[path] = _module_code(program, module, tree)
    return {p: texts[p] for p in program.modules}


def _inline_order(cand: Edited, order: list[str]) -> list[str]:
    """Files in an order where each comes after the files it inlines, at any depth (a
    package's ``__init__`` inlining its modules, inlined in turn by the script)."""
    graph: dict[str, set[str]] = {p: set() for p in order}
    for e in cand.edits:
        if e.op == "inline" and e.file in graph:
            graph[cand.program.stmts[e.stmt].file].add(e.file)
    try:
        ranked = {p: i for i, p in enumerate(TopologicalSorter(graph).static_order())}
    except CycleError:  # files inlining each other: what the first sweep got, one level
        sources = {e.file for e in cand.edits if e.op == "inline"}
        return sorted(order, key=lambda p: p not in sources)
    return sorted(order, key=lambda p: ranked.get(p, len(ranked)))


def _dirty_statements(cand: Edited) -> dict[str, frozenset[int]]:
    """Per file, the statements that carry an edit or hold an edited expression."""
    program = cand.program
    out: dict[str, set[int]] = {}
    enclosing = program.enclosing if cand.expr_of else {}
    for e in cand.edits:
        if e.stmt >= 0:
            sid = e.stmt
        elif e.node >= 0:
            sid = enclosing.get(id(program.nodes[e.node]), -1)
            if sid < 0:
                continue
        else:
            continue
        out.setdefault(program.stmts[sid].file, set()).add(sid)
    return {p: frozenset(v) for p, v in out.items()}


def _module_code(program: Original, original: cst.Module, tree: cst.Module) -> str:
    top = program.top_code
    parts = [tree.code_for_node(cst.Module(body=[], header=tree.header, footer=()))] if tree.header else []
    for stmt in tree.body:
        cached = top.get(id(stmt))
        parts.append(cached if cached is not None else tree.code_for_node(stmt))
    if tree.footer:
        parts.append(tree.code_for_node(cst.Module(body=[], header=tree.footer)))
    text = "".join(parts)
    return text


def _replacement(text: str, updated: cst.SimpleStatementLine | cst.BaseCompoundStatement):
    """The statements of ``text`` in place of ``updated``, keeping its comment lines."""
    stmts = list(cst.parse_module(text).body)
    if not stmts:
        return cst.RemoveFromParent()
    stmts[0] = stmts[0].with_changes(leading_lines=updated.leading_lines)
    return stmts[0] if len(stmts) == 1 else cst.FlattenSentinel(stmts)


def _block_starts_as_before(original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
    """A block whose first statements went starts as the original did: no blank line
    under ``class Data(Dataset):`` that only separated the removed ``__init__`` from the
    next method (comment lines stay)."""
    first = updated.body[0]
    lines = getattr(first, "leading_lines", ())
    had_blank = any(line.comment is None for line in getattr(original.body[0], "leading_lines", ()))
    if had_blank or not any(line.comment is None for line in lines):
        return updated
    kept = [line for line in lines if line.comment is not None]
    return updated.with_changes(body=[first.with_changes(leading_lines=kept), *updated.body[1:]])


def _block_statements(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    assert isinstance(block, cst.SimpleStatementSuite)
    return [cst.SimpleStatementLine(body=block.body)]


def _only_added_pass(block: cst.BaseSuite | None) -> bool:
    return isinstance(block, cst.IndentedBlock) and len(block.body) == 1 and block.body[0] is PASS_LINE


class _Renderer(cst.CSTTransformer):
    def __init__(self, cand: Edited, path: str, trees: Mapping[str, cst.Module], dirty: list[int]):
        self.cand = cand
        self.dirty = dirty  # sorted ids of statements with edits in them
        self.expr_dirty = {
            cand.program.enclosing.get(id(cand.program.nodes[i]), -1) for i in cand.expr_of
        } if cand.expr_of else set()
        self.stack: list[int] = []
        self.program = cand.program
        self.edit_of = cand.edit_of
        self.expr_of = cand.expr_of
        self.replacement_of = cand.replacement_of
        self.path = path
        self.trees = trees
        # ``import mod as m`` inlined: ``m.attr`` must become ``attr``.
        self.aliases: set[str] = set()
        for e in cand.edits:
            if e.op == "inline" and self.program.stmts[e.stmt].file == path:
                self.aliases |= _module_aliases(self.program.stmts[e.stmt].node)

    def on_visit(self, node) -> bool:
        sid = self.program.by_node.get(id(node))
        if sid is not None:
            self.stack.append(sid)
            if self.aliases:
                return True
            # Descend only where an edit is: (sid, last] holds the descendants.
            i = bisect.bisect_left(self.dirty, sid)
            return i < len(self.dirty) and self.dirty[i] <= self.program.last[sid]
        if isinstance(node, (cst.BaseExpression, cst.Arg, cst.BaseSmallStatement, cst.Decorator, cst.Parameters)):
            return bool(self.aliases) or (bool(self.stack) and self.stack[-1] in self.expr_dirty)
        return True

    def on_leave(self, original_node, updated_node):
        if self.stack and self.program.by_node.get(id(original_node)) is not None:
            self.stack.pop()
        if self.expr_of:
            idx = self.program.node_ids.get(id(original_node))
            if idx is not None and idx in self.expr_of:
                edit = self.expr_of[idx]
                if edit.op == "remove":
                    return cst.RemoveFromParent()
                return parse_expression(edit.text)
        if isinstance(updated_node, cst.IndentedBlock) and not updated_node.body:
            return updated_node.with_changes(body=[PASS_LINE])
        if isinstance(updated_node, cst.IndentedBlock) and len(updated_node.body) < len(original_node.body):
            updated_node = _block_starts_as_before(original_node, updated_node)
        if (self.expr_of
                and isinstance(updated_node,
                               (cst.Assign, cst.Expr, cst.Return, cst.Arg, cst.Element, cst.DictElement))):
            updated_node = _unparenthesised_value(self, original_node, updated_node)
        if (isinstance(updated_node, cst.Call) and updated_node.args
                and len(updated_node.args) < len(original_node.args)):
            # An argument was removed: the last one left ends as the original's last did
            # (no comma it did not have; one element per line keeps its line break).
            last = updated_node.args[-1].with_changes(comma=original_node.args[-1].comma)
            return updated_node.with_changes(args=[*updated_node.args[:-1], last])
        if (isinstance(updated_node, (cst.List, cst.Tuple, cst.Set, cst.Dict)) and updated_node.elements
                and len(updated_node.elements) < len(original_node.elements)):
            # An element was removed: the last one left ends as the original's last did,
            # but a tuple of one keeps its comma (``(a,)``, not ``(a)``).
            comma = original_node.elements[-1].comma
            if isinstance(updated_node, cst.Tuple) and len(updated_node.elements) == 1:
                if isinstance(comma, cst.MaybeSentinel):
                    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(""))
            last = updated_node.elements[-1].with_changes(comma=comma)
            return updated_node.with_changes(elements=[*updated_node.elements[:-1], last])
        if (isinstance(updated_node, cst.Param) and original_node.annotation is not None
                and updated_node.annotation is None):
            # ``y: int = 0`` without its annotation is written ``y=0``, not ``y = 0``.
            if isinstance(updated_node.equal, cst.AssignEqual):
                tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace(""))
                return updated_node.with_changes(equal=tight)
            return updated_node
        if isinstance(updated_node, cst.Parameters):
            # A parameter was removed: the last one left in each list ends as that list's
            # last did (``def f(a, b)`` without ``b`` is ``def f(a)``, not ``def f(a, )``).
            fixes = {}
            for part in ("posonly_params", "params", "kwonly_params"):
                old, new = getattr(original_node, part), getattr(updated_node, part)
                if new and len(new) < len(old):
                    fixes[part] = [*new[:-1], new[-1].with_changes(comma=old[-1].comma)]
            return updated_node.with_changes(**fixes) if fixes else updated_node
        if (
            isinstance(updated_node, (cst.Import, cst.ImportFrom))
            and not isinstance(updated_node.names, cst.ImportStar)
            and updated_node.names
            and len(updated_node.names) < len(original_node.names)
        ):
            # ``from m import a, b`` without ``b``: no dangling comma (a parenthesised
            # list keeps the original's trailing comma and line break).
            comma = original_node.names[-1].comma
            if not (isinstance(updated_node, cst.ImportFrom) and updated_node.lpar and isinstance(comma, cst.Comma)):
                comma = cst.MaybeSentinel.DEFAULT
            last = updated_node.names[-1].with_changes(comma=comma)
            return updated_node.with_changes(names=[*updated_node.names[:-1], last])
        if (
            isinstance(updated_node, (cst.Dict, cst.List, cst.Tuple, cst.Set))
            and updated_node.elements
            and len(updated_node.elements) < len(original_node.elements)
        ):
            # (as for arguments: ``{\n    "a": x,\n}``, not ``{\n    "a": x,\n    \n}``)
            last = updated_node.elements[-1].with_changes(comma=original_node.elements[-1].comma)
            return updated_node.with_changes(elements=[*updated_node.elements[:-1], last])
        if isinstance(updated_node, cst.Attribute) and self.aliases:
            if isinstance(updated_node.value, cst.Name) and updated_node.value.value in self.aliases:
                return cst.Name(updated_node.attr.value)
            return updated_node
        sid = self.program.by_node.get(id(original_node))
        if sid is None:
            return updated_node
        stmt = self.program.stmts[sid]
        updated_node = _tidy(updated_node)
        if stmt.kind == "elif":
            parent_edit = self.edit_of.get(stmt.parent)
            if parent_edit is not None and parent_edit.op == "else":
                return updated_node  # in statement position: the parent applies our edit
            edit = self.edit_of.get(sid)
            return updated_node if edit is None else _elif_in_place(edit, updated_node)
        edit = self.edit_of.get(sid)
        if edit is None:
            replacement = self.replacement_of.get(sid)
            if replacement is not None:
                return _replacement(replacement.text, updated_node)
            return updated_node
        return self._statement(edit, original_node, updated_node)

    def _statement(self, edit: Edit, original, updated):
        op = edit.op
        if op == "delete":
            return cst.RemoveFromParent()
        if op == "body":
            if not isinstance(getattr(updated, "body", None), cst.BaseSuite):
                return updated  # nothing to hoist from a simple statement
            stmts = _block_statements(updated.body)
            if isinstance(updated, (cst.Try, cst.TryStar)):
                if updated.orelse is not None:
                    stmts += _block_statements(updated.orelse.body)
                if updated.finalbody is not None:
                    stmts += _block_statements(updated.finalbody.body)
            return cst.FlattenSentinel(stmts)
        if op == "else":
            if not isinstance(updated, cst.If):
                return updated
            orelse = updated.orelse
            if orelse is None:
                return cst.RemoveFromParent()
            if isinstance(orelse, cst.Else):
                return cst.FlattenSentinel(_block_statements(orelse.body))
            # An elif chain: its head becomes an ``if`` statement, with its own edit.
            elif_sid = self.program.by_node[id(original.orelse)]
            elif_edit = self.edit_of.get(elif_sid)
            if elif_edit is None:
                return orelse
            return self._statement(elif_edit, original.orelse, orelse)
        if op == "inline":
            return self._inline(edit, updated)
        raise ValueError(f"unknown edit {edit!r}")

    def _inline(self, edit: Edit, updated):
        tree = self.trees.get(edit.file)
        if tree is None:
            return updated
        body: list[cst.BaseStatement] = [s for s in tree.body if not _is_main_guard(s) and not _is_future_import(s)]
        stmt = self.program.stmts[edit.stmt]
        body += _alias_assignments(stmt.node, stmt.file)
        return cst.FlattenSentinel(body) if body else cst.RemoveFromParent()


def _unparenthesised_value(renderer, original_node, updated_node):
    """``x = (a * b)`` -> ``x = a * b`` where an edit put ``(a * b)`` in a position that
    needs no parentheses (the whole value of an assignment, an expression statement, a
    return, an argument, an element of a list or a dict).  Only parentheses of edited values: the user's own stay."""
    value = getattr(original_node, "value", None)
    new = updated_node.value
    if value is None or new is None:
        return updated_node
    idx = renderer.program.node_ids.get(id(value))
    if idx is None or idx not in renderer.expr_of:
        return updated_node
    if isinstance(new, (cst.Tuple, cst.GeneratorExp, cst.Yield, cst.NamedExpr)) or not getattr(new, "lpar", None):
        return updated_node
    return updated_node.with_changes(value=new.with_changes(lpar=[], rpar=[]))


def _tidy(node):
    """Drop ``else``/``finally`` parts that edits emptied (they hold only our ``pass``)."""
    if isinstance(node, (cst.If, cst.For, cst.While)) and isinstance(node.orelse, cst.Else):
        if _only_added_pass(node.orelse.body):
            return node.with_changes(orelse=None)
    if isinstance(node, (cst.Try, cst.TryStar)):
        if node.orelse is not None and _only_added_pass(node.orelse.body):
            node = node.with_changes(orelse=None)
        if node.finalbody is not None and node.handlers and _only_added_pass(node.finalbody.body):
            node = node.with_changes(finalbody=None)
    return node


def _elif_in_place(edit: Edit, updated: cst.If):
    if edit.op == "delete":
        return cst.RemoveFromParent()  # drops the rest of the chain
    if edit.op == "body":
        return cst.Else(body=updated.body)
    if edit.op == "else":
        return updated.orelse if updated.orelse is not None else cst.RemoveFromParent()
    return updated


def _is_main_guard(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    code = cst.Module(body=[]).code_for_node(stmt.test).replace("'", '"').replace(" ", "")
    return code in ('__name__=="__main__"', '"__main__"==__name__')


def _is_future_import(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and any(isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
                for s in stmt.body)
    )


def _module_aliases(node: cst.CSTNode) -> set[str]:
    """Names under which ``import mod [as m]`` binds the module."""
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Import):
        alias = node.body[0].names[0]
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            return {alias.asname.name.value}
        if isinstance(alias.name, cst.Name):
            return {alias.name.value}
    return set()


def _alias_assignments(node: cst.CSTNode, file: str | None = None) -> list[cst.BaseStatement]:
    target = import_targets(node, file)
    if target is None:
        return []
    out: list[cst.BaseStatement] = []
    for name, asname in target[1]:
        if asname is not None and asname != name:
            out.append(cst.parse_statement(f"{asname} = {name}\n"))
    return out

