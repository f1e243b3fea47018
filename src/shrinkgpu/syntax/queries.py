"""Questions passes ask of a program, in one public place.

What several passes need (the names bound to modules, a statement's own parts, the class
of an instance, a method of it, parameter substitution) lives here, so that a pass is
one file that imports public names only.
"""

from __future__ import annotations

import re

import libcst as cst

from shrinkgpu.syntax.code import code_of, parse_expression
from shrinkgpu.syntax.program import Candidate

__all__ = [
    "Substitute", "assigned_attributes", "assigned_names", "bound_names", "encloses", "failing_statements", "free_names", "param_names", "bound_sequence", "class_method_of", "first_item", "first_param", "header_parts", "instance_class", "method_of",
    "module_names", "nth_item", "one_iteration", "runs_once", "variable_names",
]


def encloses(program, outer: int, inner: int) -> bool:
    """Whether statement ``inner`` is ``outer`` or nested in it."""
    cur = inner
    while cur is not None:
        if cur == outer:
            return True
        cur = program.stmts[cur].parent
    return False


def failing_statements(program) -> set[int]:
    """The statements on the first error's stack (``facts.stack``): of each user frame,
    the innermost statement holding its line."""
    out = set()
    for file, line in program.facts.stack:
        sid = program.deps.statement_at(file, line)
        if sid is not None:
            out.add(sid)
    return out


def header_parts(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What of a statement is its own: all of a simple line, the header of a compound."""
    if isinstance(node, cst.SimpleStatementLine):
        return [node]
    parts: list[cst.CSTNode] = []
    for field in ("test", "iter", "items"):
        part = getattr(node, field, None)
        if isinstance(part, cst.CSTNode):
            parts.append(part)
        elif isinstance(part, (list, tuple)):
            parts.extend(part)
    return parts



class _VariableNames(cst.CSTVisitor):
    def __init__(self, keywords: bool):
        self.keywords = keywords
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False  # ``x.fc``: ``fc`` is not a name of this scope

    def visit_Arg(self, node: cst.Arg) -> bool:
        if self.keywords:
            return True
        node.value.visit(self)
        return False  # ``f(seed=1)``: ``seed`` is not read here


def variable_names(node: cst.CSTNode, keywords: bool = True) -> set[str]:
    """The identifiers a tree holds other than attribute names (``x.fc`` holds ``x``);
    with ``keywords=False`` not the keywords of call arguments either."""
    visitor = _VariableNames(keywords)
    node.visit(visitor)
    return visitor.names


def module_names(program) -> set[str]:
    """Names the program binds to imported modules (``torch``, ``nn``, ``F``, ``np``)."""
    out: set[str] = set()
    for module in program.modules.values():
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            bound = alias.asname.name if alias.asname else alias.name
                            out.add(code_of(bound).split(".")[0])
    return out



def first_param(fn: cst.FunctionDef) -> str | None:
    params = list(fn.params.posonly_params) + list(fn.params.params)
    return params[0].name.value if params else None



def instance_class(cand: Candidate, binder: int) -> int | None:
    """The local class of ``x`` when ``binder`` is ``x = LocalClass(...)``."""
    program = cand.program
    node = program.stmts[binder].node
    if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1:
        return None
    assign = node.body[0]
    if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Call):
        return None
    if not isinstance(assign.value.func, cst.Name):
        return None
    classes = program.deps.binders(assign.value.func)
    if len(classes) != 1:
        return None
    (cls_sid,) = classes
    if program.stmts[cls_sid].kind != "class" or cls_sid not in cand.live:
        return None
    return cls_sid



def method_of(cand: Candidate, cls_sid: int, name: str) -> tuple[int, cst.FunctionDef] | None:
    program = cand.program
    for child in program.children.get(cls_sid, ()):
        node = program.stmts[child].node
        if isinstance(node, cst.FunctionDef) and node.name.value == name and child in cand.live:
            if any(code_of(d.decorator) in ("staticmethod", "classmethod", "property") for d in node.decorators):
                return None
            return child, node
    return None



def class_method_of(cand: Candidate, cls_sid: int, name: str) -> tuple[int, cst.FunctionDef, str] | None:
    """(statement, def, ``"static"`` or ``"class"``) for a ``@staticmethod`` or
    ``@classmethod`` called on the class itself (``Config.from_cli(argv)``)."""
    program = cand.program
    for child in program.children.get(cls_sid, ()):
        node = program.stmts[child].node
        if isinstance(node, cst.FunctionDef) and node.name.value == name and child in cand.live:
            kinds = [code_of(d.decorator) for d in node.decorators]
            if kinds == ["staticmethod"]:
                return child, node, "static"
            if kinds == ["classmethod"]:
                return child, node, "class"
            return None
    return None


class Substitute(cst.CSTTransformer):
    """Parameters -> argument texts, for names that are reads of a parameter only: not
    attribute names (``x.mean``), keywords (``norm(p=p)``) or names a lambda or
    comprehension binds for itself."""

    def __init__(self, values: dict[str, str]):
        self.values = values
        self.shadowed: list[set[str]] = []

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        # The attribute name went through leave_Name too: put the original back.
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg):
        return updated_node.with_changes(keyword=original_node.keyword)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.shadowed.append({p.name.value for p in node.params.params})
        return True

    def leave_Lambda(self, original_node, updated_node):
        self.shadowed.pop()
        return updated_node

    def _comp_enter(self, node) -> bool:
        names: set[str] = set()
        comp = node.for_in
        while comp is not None:
            for target in assigned_names(comp.target):
                names.add(target)
            comp = comp.inner_for_in
        self.shadowed.append(names)
        return True

    def _comp_leave(self, original_node, updated_node):
        self.shadowed.pop()
        return updated_node

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comp_enter
    leave_ListComp = leave_SetComp = leave_GeneratorExp = leave_DictComp = _comp_leave

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name):
        text = self.values.get(original_node.value)
        if text is None or any(original_node.value in names for names in self.shadowed):
            return updated_node
        return parse_expression(text)



def assigned_names(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in assigned_names(el.value)]
    return []


class _Binds(cst.CSTVisitor):
    """Names a block binds: assignment, loop and ``as`` targets, definitions, imports."""

    def __init__(self):
        self.names: set[str] = set()

    def _targets(self, node) -> None:
        if node is None:
            return
        for n in assigned_names(node) or ([] if not isinstance(node, cst.Name) else [node.value]):
            self.names.add(n)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is None:
            self.names.add(code_of(node.name).split(".")[0])

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_ListComp(self, node) -> bool:
        return False

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp


def param_names(fn: cst.FunctionDef) -> set[str]:
    """Every name a function's parameters bind (``*args`` and ``**kwargs`` included)."""
    params = fn.params
    names = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def free_names(fn: cst.FunctionDef, keywords: bool = True) -> set[str]:
    """The names a function's body reads from the scopes around it: not its parameters
    nor what its body binds (``keywords=False``: nor keywords of call arguments)."""
    return variable_names(fn.body, keywords=keywords) - param_names(fn) - bound_names(fn.body)


def bound_names(node: cst.CSTNode) -> set[str]:
    """Names a statement (or block) binds in its own scope: assignment, loop, ``with``
    and walrus targets, definitions, imports; not what nested functions, lambdas or
    comprehensions bind for themselves."""
    visitor = _Binds()
    node.visit(visitor)
    return visitor.names



class _LoopExits(cst.CSTVisitor):
    """``break``/``continue`` that belong to this loop (not to loops nested in it)."""

    def __init__(self):
        self.found = False

    def visit_Break(self, node: cst.Break) -> None:
        self.found = True

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_For(self, node: cst.For) -> bool:
        return False

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def first_item(iterable: cst.BaseExpression) -> str:
    """Source for the first item of ``iterable``: ``range(1, 5)`` -> ``1``, otherwise
    ``next(iter(...))``."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        args = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(args) == len(iterable.args) and len(args) in (1, 2):
            return "0" if len(args) == 1 else code_of(args[0].value)
    return f"next(iter({code_of(iterable)}))"


def nth_item(iterable: cst.BaseExpression, n: int, program=None) -> tuple[str, str | None]:
    """(source for item ``n`` of ``iterable``, a module to import for it or None):
    ``range(1, 5)``, 2 -> ``3``; ``items`` bound to a list -> ``items[2]``; otherwise
    ``next(itertools.islice(..., n, None))``, which skips the first items without running
    the loop body on them."""
    if isinstance(iterable, cst.Name) and program is not None:
        if bound_sequence(program, iterable, (cst.List, cst.ListComp, cst.Tuple)):
            return f"{iterable.value}[{n}]", None
    if (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "enumerate"
        and len(iterable.args) == 1
        and iterable.args[0].keyword is None
        and not iterable.args[0].star
    ):
        inner, module = nth_item(iterable.args[0].value, n, program)
        return f"({n}, {inner})", module
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        args = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(args) == len(iterable.args) and len(args) in (1, 2):
            if len(args) == 1:
                return str(n), None
            start = args[0].value
            if isinstance(start, cst.Integer):
                return str(int(start.value, 0) + n), None
            return f"{code_of(start)} + {n}", None
    return f"next(itertools.islice({code_of(iterable)}, {n}, None))", "itertools"


def bound_sequence(program, node, kinds=None) -> bool:
    """Whether ``node`` is a list literal or comprehension, or a name bound once to one
    (``kinds`` widens what counts, e.g. to tuples): something ``[k]`` and ``[:k]`` index
    the way a loop or a loader walks it."""
    kinds = kinds or (cst.List, cst.ListComp)
    if isinstance(node, kinds):
        return True
    if not isinstance(node, cst.Name):
        return False
    binders = program.deps.binders(node)
    if len(binders) != 1:
        return False
    stmt = program.stmts[next(iter(binders))].node
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Assign)
        and isinstance(stmt.body[0].value, kinds)
    )


def runs_once(loop: cst.CSTNode) -> bool:
    """Whether a ``for``/``while`` body can stand alone as one pass through it: no
    ``else``, no ``break``/``continue`` of its own, not ``async``."""
    if getattr(loop, "orelse", None) is not None or getattr(loop, "asynchronous", None) is not None:
        return False
    body = getattr(loop, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        return False
    exits = _LoopExits()
    for stmt in body.body:
        stmt.visit(exits)
    return not exits.found


def one_iteration(loop: cst.CSTNode, iteration: int, program=None) -> str | None:
    """Source for one pass through a ``for`` loop's body with its target bound to item
    ``iteration`` (0: the first); None when the body cannot stand alone."""
    if not isinstance(loop, cst.For) or not runs_once(loop):
        return None
    if iteration <= 0:
        lines = [f"{code_of(loop.target)} = {first_item(loop.iter)}\n"]
    else:
        item, module = nth_item(loop.iter, iteration, program)
        lines = ([f"import {module}\n"] if module else []) + [f"{code_of(loop.target)} = {item}\n"]
    lines += [code_of(stmt) for stmt in loop.body.body]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def assigned_attributes(program, name: str, readers) -> set[str]:
    """The attributes of the object ``name`` that some statement sets on it
    (``name.attr = ...``, ``name.attr: T = ...``); ``readers`` are (Name, Attribute)
    pairs of its reads, as ``passes.base.single_bindings`` gives them."""
    deps = program.deps
    out = set()
    for n, a in readers:
        if a is None:
            continue
        sid = deps.enclosing(n)
        code = program.stmt_code(sid).lstrip() if sid is not None else ""
        if re.match(rf"{re.escape(name)}\.{re.escape(a.attr.value)}\s*(?::[^=]+)?=(?!=)", code):
            out.add(a.attr.value)
    return out
