"""Lists of records built by loops, cut to the fields that are read.

Dataset code builds its samples one at a time::

    rows = []
    for k, c in enumerate(names):
        name = CLASS_NAMES[c]
        rows.append({"id": f"v{k}", "label": IDS[name], "emb": torch.randn(32)})

and the step that fails reads one or two fields of the first rows.  A maintainer writes
the fields as lists, built by comprehensions, and slices them.  Three passes get there,
each checked by the oracle like any other edit:

- ``drop-enumerate``: ``for k, c in enumerate(xs)`` with ``k`` unread -> ``for c in xs``;
- ``append-loop-to-list``: ``L = []`` and a loop whose body only names values and
  appends one -> ``L = [value for target in iterable]``;
- ``split-records``: ``rows = [{"a": A, "b": B} for c in names]`` whose every read is
  ``rows[...]["a"]`` or ``rows[...]["b"]`` -> ``a = [A for c in names]``,
  ``b = [B for c in names]``, one list per field read (fields nobody reads are gone), and
  ``[rows[i]["a"] for i in range(n)]`` -> ``a[:n]``.
"""

from __future__ import annotations

import builtins
import keyword
import re

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, lone_assignment, names_read, single_bindings
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import Substitute, assigned_names, header_parts


def _enumerate_parts(target: cst.BaseExpression, iterable: cst.BaseExpression):
    """(index name, item target, enumerated iterable) for ``k, c`` over ``enumerate(xs)``."""
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
        return None
    index, item = target.elements[0].value, target.elements[1].value
    if not isinstance(index, cst.Name) or any(isinstance(el, cst.StarredElement) for el in target.elements):
        return None
    if not (isinstance(iterable, cst.Call) and code_of(iterable.func) == "enumerate" and len(iterable.args) == 1):
        return None
    arg = iterable.args[0]
    if arg.keyword is not None or arg.star:
        return None
    return index.value, item, arg.value


def _item_text(item: cst.BaseExpression) -> str:
    text = code_of(item)
    # ``for k, (a, b) in enumerate(xs)`` -> ``for a, b in xs``
    if isinstance(item, cst.Tuple) and item.lpar:
        return text[1:-1] if text.startswith("(") and text.endswith(")") else text
    return text


class _Comprehensions(cst.CSTVisitor):
    """(comprehension, one of its ``for`` clauses) pairs, for every clause."""

    def __init__(self):
        self.found: list[tuple[cst.CSTNode, cst.CompFor]] = []

    def _comp(self, node) -> None:
        clause = node.for_in
        while clause is not None:
            self.found.append((node, clause))
            clause = clause.inner_for_in

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comp


def _names_besides(comp: cst.CSTNode, clause: cst.CompFor) -> set[str]:
    """Every name in the comprehension but the ones in ``clause``'s target."""
    names: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_CompFor(self, node: cst.CompFor) -> bool:
            if node is clause:
                node.iter.visit(self)
                for cond in node.ifs:
                    cond.visit(self)
                if node.inner_for_in is not None:
                    node.inner_for_in.visit(self)
                return False
            return True

    comp.visit(Names())
    return names


class DropEnumerate(LevelZeroPass):
    name = "drop-enumerate"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        for s in cand.editable():
            node = s.node
            if isinstance(node, cst.For) and s.kind == "for":
                parts = _enumerate_parts(node.target, node.iter)
                if parts is not None and not deps.readers(s.id, parts[0]):
                    _, item, inner = parts
                    new = node.with_changes(target=cst.parse_expression(_item_text(item)), iter=inner, leading_lines=[])
                    out.append((Edit("replace", s.id, text=code_of(new)),))
                    continue  # the body's comprehensions: after the rebase
            finder = _Comprehensions()
            for part in header_parts(node):
                part.visit(finder)
            for comp, clause in finder.found:
                parts = _enumerate_parts(clause.target, clause.iter)
                if parts is None or parts[0] in _names_besides(comp, clause):
                    continue
                _, item, inner = parts
                out.append((
                    Edit("expr", node=program.node_index(clause.target), text=_item_text(item)),
                    Edit("expr", node=program.node_index(clause.iter), text=code_of(inner)),
                ))
        return out


def _empty_list_binding(node: cst.CSTNode) -> str | None:
    """``L`` (as text) for ``L = []``, ``self.rows = []``, ``L = list()``."""
    assign = lone_assignment(node)
    if assign is None:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return None
    value = assign.value
    empty = (isinstance(value, cst.List) and not value.elements) or code_of(value).replace(" ", "") == "list()"
    return code_of(target) if empty else None


def _appended(stmt: cst.CSTNode, target: str) -> cst.BaseExpression | None:
    """``E`` for the line ``target.append(E)``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    call = small.value
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"):
        return None
    if code_of(call.func.value) != target or len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
        return None
    return call.args[0].value


def _mentions(code: str, target: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(target)}(?!\w)", code) is not None


class _NameUses(cst.CSTVisitor):
    def __init__(self):
        self.counts: dict[str, int] = {}

    def visit_Name(self, node: cst.Name) -> None:
        self.counts[node.value] = self.counts.get(node.value, 0) + 1

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False


class AppendLoopToList(LevelZeroPass):
    """``L = []`` and ``for t in xs: v = f(t); L.append(g(v))`` -> ``L = [g(f(t)) for t in
    xs]``, where the loop's names (``t``, ``v``) are read nowhere after it and each named
    value is read once."""

    name = "append-loop-to-list"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        editable = cand.editable()
        for s in editable:
            target = _empty_list_binding(s.node)
            if target is None:
                continue
            # the loop: the next statement of the block that mentions the list
            siblings = [
                t for t in editable
                if t.id > s.id and (t.parent, t.branch, t.file) == (s.parent, s.branch, s.file)
            ]
            loop = next((t for t in siblings if _mentions(program.stmt_code(t.id), target)), None)
            if loop is None or loop.kind != "for" or not isinstance(loop.node, cst.For):
                continue
            node = loop.node
            if node.orelse is not None or node.asynchronous is not None or not isinstance(node.body, cst.IndentedBlock):
                continue
            body = list(node.body.body)
            element = _appended(body[-1], target) if body else None
            if element is None or any(not isinstance(b, cst.SimpleStatementLine) for b in body):
                continue
            if _mentions(code_of(element), target) or any(_mentions(code_of(b), target) for b in body[:-1]):
                continue  # ``L.append(f(L[-1]))``: a comprehension cannot read itself
            if any(b in cand.edit_of for b in range(loop.id, program.last[loop.id] + 1)):
                continue
            values: dict[str, str] = {}
            names = set(assigned_names(node.target))
            ok = len(names) > 0
            for line in body[:-1]:
                small = line.body[0] if len(line.body) == 1 else None
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    ok = False
                    break
                name = small.targets[0].target.value
                values[name] = code_of(small.value.visit(Substitute(values)))
                if not isinstance(small.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
                    values[name] = f"({values[name]})"
                names.add(name)
            if not ok:
                continue
            # each named value read exactly once, by what follows it in the body
            uses = _NameUses()
            for line in body[1:]:
                line.visit(uses)
            if any(uses.counts.get(n, 0) != 1 for n in values):
                continue
            # nothing after the loop reads its names
            inside = set(range(loop.id, program.last[loop.id] + 1))
            binders = inside
            if any(deps.readers(b, n) - inside for b in binders for n in names):
                continue
            elt = element.visit(Substitute(values))
            comp = f"[{code_of(elt)} for {code_of(node.target)} in {code_of(node.iter)}]"
            text = f"{target} = {comp}\n"
            out.append((Edit("delete", s.id), Edit("replace", loop.id, text=text)))
        return out


def _record_comprehension(value: cst.BaseExpression) -> tuple[cst.ListComp, dict[str, cst.BaseExpression]] | None:
    """``[{"a": A, "b": B} for ...]`` -> (the comprehension, {"a": A, "b": B})."""
    if not isinstance(value, cst.ListComp) or not isinstance(value.elt, cst.Dict):
        return None
    fields: dict[str, cst.BaseExpression] = {}
    for el in value.elt.elements:
        if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)):
            return None
        key = el.key.evaluated_value
        if not isinstance(key, str) or key in fields:
            return None
        fields[key] = el.value
    return (value, fields) if fields else None


def _repeatable(node: cst.BaseExpression) -> bool:
    """Whether evaluating ``node`` again gives the same items and has no effect: a name,
    an attribute, ``range(...)`` of such, a slice of such."""
    if isinstance(node, (cst.Name, cst.Integer)):
        return True
    if isinstance(node, cst.Attribute):
        return _repeatable(node.value)
    if isinstance(node, cst.Subscript):
        return _repeatable(node.value) and all(
            isinstance(el.slice, cst.Slice) or _repeatable(el.slice.value) for el in node.slice
        )
    if isinstance(node, cst.Call) and code_of(node.func) in ("range", "len", "zip", "enumerate"):
        return all(a.keyword is None and not a.star and _repeatable(a.value) for a in node.args)
    return False


def _field_reads(program, deps, read: cst.Name, fields) -> tuple[cst.BaseExpression, str, str] | None:
    """For a read ``rows`` in ``rows[X]["a"]``: (the node to replace, the field, the text
    that replaces it with ``{field}`` for the field's list): ``{field}[X]``, or
    ``{field}[:n]`` for the whole ``[rows[i]["a"] for i in range(n)]``."""
    sid = deps.enclosing(read)
    found: list[tuple[cst.BaseExpression, str, str]] = []

    class Find(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            inner = node.value
            if not (isinstance(inner, cst.Subscript) and inner.value is read):
                return
            if len(node.slice) != 1 or len(inner.slice) != 1:
                return
            key, index = node.slice[0].slice, inner.slice[0].slice
            if not (isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString)):
                return
            field = key.value.evaluated_value
            if field not in fields:
                return
            found.append((node, field, "{}" + f"[{code_of(index)}]" if isinstance(index, cst.Index) else None))

        def visit_ListComp(self, node: cst.ListComp) -> None:
            clause = node.for_in
            if clause.inner_for_in is not None or clause.ifs or not isinstance(clause.target, cst.Name):
                return
            it = clause.iter
            if not (isinstance(it, cst.Call) and code_of(it.func) == "range" and len(it.args) == 1
                    and not it.args[0].keyword):
                return
            elt = node.elt
            if not (isinstance(elt, cst.Subscript) and isinstance(elt.value, cst.Subscript)
                    and elt.value.value is read):
                return
            index = elt.value.slice[0].slice if len(elt.value.slice) == 1 else None
            key = elt.slice[0].slice if len(elt.slice) == 1 else None
            if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Name)
                    and index.value.value == clause.target.value):
                return
            if (not (isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString))
                    or key.value.evaluated_value not in fields):
                return
            found.insert(0, (node, key.value.evaluated_value, "{}" + f"[:{code_of(it.args[0].value)}]"))

    program.stmts[sid].node.visit(Find())
    if not found or found[0][2] is None:
        return None
    return found[0]


class SplitRecords(LevelZeroPass):
    """``rows = [{"a": A, "b": B, "c": C} for c in names]``, read only as ``rows[...]["a"]``
    and ``rows[...]["b"]`` -> ``a = [A for c in names]`` and ``b = [B for c in names]``;
    ``C`` is never computed."""

    name = "split-records"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        out: list[Unit] = []
        taken: set[str] | None = None  # every name of the program, once a list needs one
        for s, name, value, readers in single_bindings(cand):
            found = _record_comprehension(value)
            if found is None or len(deps.binders_named.get(name, ())) != 1:
                continue
            comp, fields = found
            reads = [n for n, _ in readers]
            if len(reads) != len({id(n) for n in deps.reads(s.id, name)}):
                continue
            parts = [_field_reads(program, deps, n, fields) for n in reads]
            if any(p is None for p in parts):
                continue
            used = [k for k in fields if any(p[1] == k for p in parts)]  # type: ignore[index]
            if len(used) > 1 and not all(_repeatable(c.iter) for c in _clauses(comp)):
                continue  # each list walks the iterable again
            if taken is None:
                taken = set(deps.binders_named) | set(dir(builtins))
                for module in program.modules.values():
                    taken |= names_read(module.code)
            renamed: dict[str, str] = {}
            for key in used:
                for new in (key, f"{name}_{key}"):
                    if (new.isidentifier() and not keyword.iskeyword(new) and new not in taken
                            and new not in renamed.values()):
                        renamed[key] = new
                        break
            if len(renamed) < len(used):
                continue
            lines = "".join(f"{renamed[k]} = {code_of(comp.with_changes(elt=fields[k]))}\n" for k in used)
            edits = [Edit("replace", s.id, text=lines)]
            for node_, key, template in parts:  # type: ignore[misc]
                edits.append(Edit("expr", node=program.node_index(node_), text=template.format(renamed[key])))
            out.append(tuple(edits))
        return out


def _clauses(comp: cst.ListComp) -> list[cst.CompFor]:
    out, clause = [], comp.for_in
    while clause is not None:
        out.append(clause)
        clause = clause.inner_for_in
    return out
