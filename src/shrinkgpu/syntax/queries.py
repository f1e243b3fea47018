"""Questions passes ask of a program, in one public place.

What several passes need (the names bound to modules, a statement's own parts, the class
of an instance, a method of it, parameter substitution) lives here, so that a pass is
one file that imports public names only.
"""

from __future__ import annotations

import functools
import re
from typing import cast

import libcst as cst

from shrinkgpu.syntax.code import code_of, parse_expression
from shrinkgpu.syntax.program import Candidate

__all__ = [
    "Substitute", "assigned_attributes", "assigned_names", "binds_an_item_of", "bound_names", "encloses",
    "failing_statements", "free_names", "param_names", "qualname_of", "bound_sequence", "class_method_of", "first_item",
    "first_param", "header_parts", "instance_class", "method_of",
    "module_names", "nth_item", "needed_by_callers", "one_iteration", "runs_once", "variable_names",
]


def encloses(program, outer: int, inner: int | None) -> bool:
    """Whether statement ``inner`` is ``outer`` or nested in it (never for None)."""
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


def qualname_of(program, sid: int) -> str:
    """The qualified name Python gives the code a statement runs in (``co_qualname``):
    ``main``, ``RopeLM.__init__``, ``main.<locals>.step``; ``<module>`` at the top level."""
    parts: list[tuple[str, bool]] = []
    cur = program.stmts[sid].parent
    while cur is not None:
        node = program.stmts[cur].node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            parts.append((node.name.value, isinstance(node, cst.FunctionDef)))
        cur = program.stmts[cur].parent
    if not parts:
        return "<module>"
    names: list[str] = []
    for i, (name, function) in enumerate(reversed(parts)):
        names.append(name)
        if function and i < len(parts) - 1:
            names.append("<locals>")
    return ".".join(names)


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
    """Source for the first item of ``iterable``: ``range(1, 5)`` -> ``1``, ``["adam",
    "sgd"]`` -> ``"adam"`` (a list or tuple literal without a starred part), otherwise
    ``next(iter(...))``."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range":
        args = [a for a in iterable.args if a.keyword is None and not a.star]
        if len(args) == len(iterable.args) and len(args) in (1, 2):
            return "0" if len(args) == 1 else code_of(args[0].value)
    if (isinstance(iterable, (cst.List, cst.Tuple)) and iterable.elements
            and not any(isinstance(e, cst.StarredElement) for e in iterable.elements)):
        first = iterable.elements[0].value
        # ``[(x)]`` (the one pass a saved state's replay writes) -> ``x``: only an atom's
        # parentheses go (``(y := 3)`` needs its own)
        atom = (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.SimpleString, cst.Integer, cst.Float)
        return code_of(first.with_changes(lpar=[], rpar=[]) if isinstance(first, atom) else first)
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


def binds_an_item_of(header: str, line: str) -> bool:
    """Whether ``line`` is the first line ``one_iteration`` writes for the loop whose
    header is ``header`` (``for batch in loader:`` -> ``batch = next(iter(loader))``, or
    an item further on): the statement that still makes the loop's call into its iterable
    once the loop has been cut to one pass."""
    forms = _item_forms(header)
    if forms is None:
        return False
    first, later = forms
    line = line.strip()
    return line == first or (line.startswith(later) and line.endswith(", None))"))


@functools.lru_cache(maxsize=32)
def _item_forms(header: str) -> tuple[str, str] | None:
    # Parsed once per header: a pass asks this of every statement of the program.
    try:
        loop = cst.parse_statement(header.rstrip() + "\n    pass\n")
    except cst.ParserSyntaxError:
        return None
    if not isinstance(loop, cst.For):
        return None
    target = code_of(loop.target)
    return f"{target} = {first_item(loop.iter)}", f"{target} = next(itertools.islice({code_of(loop.iter)}, "


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


class _Yields(cst.CSTVisitor):
    """Whether a function's own body yields (a nested def or lambda is another function)."""

    def __init__(self):
        self.found = False

    def visit_Yield(self, node: cst.Yield) -> None:
        self.found = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _value_unused(node: cst.CSTNode, call: cst.Call) -> bool:
    """Whether the statement ``node`` discards what ``call`` returns, or only tests it
    (``f(x)`` alone; ``if f(x):``; ``assert f(x)``): a None there need not fail."""
    if isinstance(node, (cst.If, cst.While)):
        return True
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        small = node.body[0]
        return isinstance(small, cst.Assert) or (isinstance(small, cst.Expr) and small.value is call)
    return False


# Bases whose ``__init__`` takes no arguments: without the class's own, ``C(cfg)`` fails
# (``nn.Module.__init__`` refuses extra arguments too).
_PLAIN_BASES = frozenset({"object", "nn.Module", "torch.nn.Module", "Module"})


def _is_dataclass(cls: cst.ClassDef) -> bool:
    for d in cls.decorators:
        dec = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if code_of(dec) in ("dataclass", "dataclasses.dataclass"):
            return True
    return False


def _member_names(node: cst.CSTNode) -> set[str]:
    """What a statement of a class body binds on the class: a method, or the names of a
    plain assignment (``pad, sep, eos = 0, 1, 2``, ``lr: float = 0.1``)."""
    if isinstance(node, cst.FunctionDef):
        return {node.name.value}
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1):
        return set()
    small = node.body[0]
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
        [small.target] if isinstance(small, cst.AnnAssign) else [])
    out: set[str] = set()
    for t in targets:
        parts = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
        out |= {p.value for p in parts if isinstance(p, cst.Name)}
    return out


def _lone_binding(node: cst.CSTNode, call: cst.Call) -> str | None:
    """``x`` for the line ``x = call``."""
    if (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Assign)
            and node.body[0].value is call and len(node.body[0].targets) == 1
            and isinstance(node.body[0].targets[0].target, cst.Name)):
        return node.body[0].targets[0].target.value
    return None


def needed_by_callers(cand: Candidate) -> frozenset[int]:
    """The statements whose deletion cannot but fail at a caller: a live statement off
    the first error's stack uses what they define, so without them every candidate that
    holds the deletion fails there with an error of its own (``cannot unpack
    non-iterable NoneType object``, ``takes 1 positional argument but 2 were given``),
    never with the user's bug.  The function or class itself may still go whole, with its
    callers.  Judged, in one pass over the program:

    - the ``return <value>`` that ends a plain function (no generator, not on the stack)
      that such a statement calls by name and unpacks, binds or computes with (not
      ``f(x)`` alone, ``if f(x):`` or ``assert f(x)``, where a None need not fail);
    - ``__init__`` with required parameters, of a class whose bases take none, that such
      a statement calls with arguments;
    - a field of a ``@dataclass`` that such a call passes by name or through ``**``;
    - a method or class attribute that such a statement reads through the class, an
      instance bound by ``x = C(...)`` (or the parameter a plain function called by name
      binds it to), or ``self`` in the class's own methods, when no other class defines
      that name and nothing sets it on an object (``vocab.encode(w)`` after
      ``vocab = Vocab(...)``).

    Off the stack only: a function on the failing stack may fail before its ``return``,
    and a failing line may fail before it makes its call (``q * cos[:T] +
    rotate_half(q)`` fails at the product).  Methods are reached through attributes,
    which scope analysis does not resolve; a read through a method's parameter or another
    object is not followed (a name like ``step`` is as likely the optimizer's)."""
    scope = _Callers(cand)
    functions = [s for s in scope.stmts if s.id in scope.live and isinstance(s.node, cst.FunctionDef)]
    classes = [s for s in scope.stmts if s.id in scope.live and isinstance(s.node, cst.ClassDef)]
    needed = scope.returns_needed(functions)
    calls_of, receivers = scope.class_receivers(classes, functions)
    needed |= scope.members_needed(classes, calls_of, receivers)
    return frozenset(needed)


class _Callers:
    """The program ``needed_by_callers`` reads, and the statements off the failing stack."""

    def __init__(self, cand: Candidate):
        self.program, self.live = cand.program, cand.live
        self.deps, self.stmts = self.program.deps, self.program.stmts
        self.failing = failing_statements(self.program)

    def off_stack(self, name: cst.CSTNode) -> bool:
        user = self.deps.enclosing(name)
        return user is not None and user in self.live and user not in self.failing

    def body(self, sid: int) -> list[int]:
        return [c for c in self.program.children.get(sid, ()) if c in self.live]

    def in_class(self, s) -> bool:
        return s.parent is not None and isinstance(self.stmts[s.parent].node, cst.ClassDef)

    def returns_needed(self, functions) -> set[int]:
        """The ``return <value>`` ending a plain function whose value a caller off the
        stack uses."""
        deps, stmts, needed = self.deps, self.stmts, set()
        on_stack = {a for f in self.failing for a in _ancestors(self.program, f)}
        for s in functions:
            last = self.body(s.id)[-1:]
            ret = stmts[last[0]].node if last else None
            if (s.id in on_stack or not isinstance(ret, cst.SimpleStatementLine) or len(ret.body) != 1
                    or not isinstance(ret.body[0], cst.Return) or ret.body[0].value is None):
                continue
            yields = _Yields()
            s.node.body.visit(yields)
            if yields.found:
                continue
            for name in deps.reads(s.id, s.node.name.value):
                call = deps.call_of(name)
                if (call is not None and self.off_stack(name)
                        # (a read of a name is always inside a statement)
                        and not _value_unused(stmts[cast(int, deps.enclosing(name))].node, call)):
                    needed.add(last[0])
                    break
        return needed

    def class_receivers(self, classes, functions) -> tuple[dict[int, list[cst.Call]], dict[int, list[cst.Name]]]:
        """For each class: its calls off the stack, and the names its instances are read
        through (the class, an instance bound by ``x = C(...)``, the parameter a plain
        function called by name binds it to, ``self`` in its own methods)."""
        deps, stmts = self.deps, self.stmts
        # (a Name read of an instance, by id) -> its class; then one call down, the reads of
        # the parameter a plain function called by name binds it to
        instance_of: dict[int, int] = {}
        receivers: dict[int, list[cst.Name]] = {}
        calls_of: dict[int, list[cst.Call]] = {}
        for c in classes:
            reads = [n for n in deps.reads(c.id, c.node.name.value) if self.off_stack(n)]
            calls = [k for k in (deps.call_of(n) for n in reads) if k is not None]
            calls_of[c.id], receivers[c.id] = calls, list(reads)
            for k in calls:
                binder = deps.enclosing(k)
                if binder is None or binder not in self.live:
                    continue
                x = _lone_binding(stmts[binder].node, k)
                if x is not None:
                    for n in deps.reads(binder, x):
                        receivers[c.id].append(n)
                        instance_of[id(n)] = c.id
            for m in self.body(c.id):
                fn = stmts[m].node
                first = first_param(fn) if isinstance(fn, cst.FunctionDef) and not fn.decorators else None
                if first is not None:
                    receivers[c.id] += deps.reads(m, first)
        if instance_of:
            for s in functions:
                if s.node.decorators or self.in_class(s):
                    continue
                params = [p.name.value for p in list(s.node.params.posonly_params) + list(s.node.params.params)]
                for name in deps.reads(s.id, s.node.name.value):
                    call = deps.call_of(name)
                    if call is None or not self.off_stack(name):
                        continue
                    for position, arg in enumerate(call.args):
                        cls = None if arg.star else instance_of.get(id(arg.value))
                        param = (arg.keyword.value if arg.keyword is not None
                                 else (params[position] if position < len(params) else None))
                        if cls is not None and param is not None:
                            receivers[cls] += deps.reads(s.id, param)
        return calls_of, receivers

    def members_needed(self, classes, calls_of, receivers) -> set[int]:
        """``__init__``s, dataclass fields and members the callers off the stack need."""
        deps, stmts, program, needed = self.deps, self.stmts, self.program, set()
        defined_by: dict[str, int] = {}
        for c in classes:
            for m in self.body(c.id):
                for n in _member_names(stmts[m].node):
                    defined_by[n] = defined_by.get(n, 0) + 1
        for c in classes:
            cls, calls = c.node, calls_of[c.id]
            plain = not cls.keywords and all(code_of(b.value) in _PLAIN_BASES for b in cls.bases)
            dataclass = _is_dataclass(cls)
            read: dict[str, list[cst.Name]] = {}
            for r in receivers[c.id]:
                attr = deps.attribute_around(r)
                if attr is not None and self.off_stack(r) and not deps.is_del_target(attr):
                    read.setdefault(attr.attr.value, []).append(r)
            for m in self.body(c.id):
                node = stmts[m].node
                if isinstance(node, cst.FunctionDef) and node.name.value == "__init__":
                    params = list(node.params.posonly_params) + list(node.params.params)
                    required = any(p.default is None for p in params[1:] + list(node.params.kwonly_params))
                    if required and plain and not dataclass and any(k.args for k in calls):
                        needed.add(m)
                    continue
                names = {n for n in _member_names(node) if not n.startswith("__")}
                if (dataclass and names and isinstance(node, cst.SimpleStatementLine)
                        and isinstance(node.body[0], cst.AnnAssign)):
                    if any(a.star == "**" or (a.keyword is not None and a.keyword.value in names)
                           for k in calls for a in k.args):
                        needed.add(m)
                        continue
                for n in names:
                    if defined_by.get(n, 0) > 1 or deps.attribute_written(n):
                        continue
                    # a read inside the member itself does not keep it
                    if any(not encloses(program, m, deps.enclosing(r)) for r in read.get(n, ())):
                        needed.add(m)
                        break
        return needed


def _ancestors(program, sid: int) -> list[int]:
    out = []
    while sid is not None:
        out.append(sid)
        sid = program.stmts[sid].parent
    return out
