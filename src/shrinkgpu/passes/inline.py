"""Calls into the user's own code replaced by the code they run.

A maintainer's repro is flat: no ``main()``, no ``train_one_epoch(...)``, the failing
steps one after the other.  This pass replaces a call statement (``f(a)`` or
``x = f(a)``) by the callee's body, with its parameters bound to the arguments; a method
call (``trainer.fit(...)``, ``self.validate(...)``, ``Trainer(model).fit(...)``) by the
method's body with ``self`` bound to the instance; and a call of a local ``nn.Module``
instance (``model(x)``) by its ``forward`` body.  A ``@torch.no_grad()`` function becomes a ``with`` block.  The
callee's own definition goes in the same unit when this was its only call, so the unit
shrinks the program.

Only bodies whose one ``return`` is the last statement are inlined: an early return
would need control flow the call site does not have.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit, names_read, single_bindings
from shrinkgpu.syntax.code import code_of, parse_expression
from shrinkgpu.syntax.deps import mutated_names
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.placeholders import instance_free_constructor
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import (
    Substitute,
    assigned_names,
    bound_names,
    class_method_of,
    first_param,
    instance_class,
    method_of,
    module_names,
)


class _Returns(cst.CSTVisitor):
    """Returns and yields of a function body, not looking into nested scopes."""

    def __init__(self):
        self.returns: list[cst.Return] = []
        self.other = False  # yield, global, nonlocal: not inlinable

    def visit_Return(self, node: cst.Return) -> None:
        self.returns.append(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        self.other = True

    def visit_Global(self, node: cst.Global) -> None:
        self.other = True

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.other = True

    def visit_Await(self, node: cst.Await) -> None:
        self.other = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


# Decorators whose whole effect is a context around the body.
_CONTEXT_DECORATORS = ("torch.no_grad()", "torch.inference_mode()", "torch.enable_grad()")


def decorator_context(fn: cst.FunctionDef) -> tuple[bool, str | None] | None:
    """(inlinable, context manager to wrap the body in) for a function's decorators."""
    if not fn.decorators:
        return True, None
    if len(fn.decorators) != 1:
        return None
    text = code_of(fn.decorators[0].decorator)
    if text in _CONTEXT_DECORATORS:
        return True, text
    if text in ("staticmethod", "classmethod"):
        return True, None  # how it binds is the call site's business (InlineCalls._callee)
    return None


def _body_of(fn: cst.FunctionDef) -> tuple[list[cst.BaseStatement], cst.BaseExpression | None] | None:
    """The statements to paste and the returned expression, or None if not inlinable."""
    if fn.asynchronous is not None or decorator_context(fn) is None:
        return None
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    visitor = _Returns()
    fn.body.visit(visitor)
    if visitor.other:
        return None
    stmts = list(fn.body.body)
    # A docstring is not code to run.
    if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and len(stmts[0].body) == 1:
        first = stmts[0].body[0]
        if isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
            stmts = stmts[1:]
    if len(visitor.returns) > 1:
        return None
    returned = None
    if visitor.returns:
        last = stmts[-1] if stmts else None
        if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
                and last.body[0] is visitor.returns[0]):
            return None
        returned = visitor.returns[0].value
        stmts = stmts[:-1]
    return stmts, returned


def match_arguments(
    positional: list[cst.Param], keyword_only: list[cst.Param], call: cst.Call
) -> dict[str, str] | None:
    """Parameter name -> the argument's (or default's) text, as ``call`` binds them; None
    when the call cannot be matched statically (``*args``, a missing argument, a keyword
    the function does not take)."""
    values: dict[str, str] = {}
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if index >= len(positional):
                return None
            values[positional[index].name.value] = code_of(arg.value)
            index += 1
        else:
            values[arg.keyword.value] = code_of(arg.value)
    out: dict[str, str] = {}
    for p in positional + keyword_only:
        name = p.name.value
        if name in values:
            out[name] = values.pop(name)
        elif p.default is not None:
            out[name] = code_of(p.default)
        else:
            return None
    return None if values else out


def _bindings(params: cst.Parameters, call: cst.Call, skip_first: bool) -> list[str] | None:
    """``name = value`` lines that bind ``params`` as ``call`` would, or None."""
    if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) and not isinstance(params.star_arg, cst.ParamStar):
        return None
    if params.star_kwarg is not None:
        return None
    positional = list(params.posonly_params) + list(params.params)
    if skip_first:
        if not positional:
            return None
        positional = positional[1:]
    values = match_arguments(positional, list(params.kwonly_params), call)
    if values is None:
        return None
    return [f"{name} = {value}" for name, value in values.items() if value != name]  # ``x = x`` says nothing


def _used_bindings(bindings: list[str], body: list[cst.BaseStatement], returned) -> list[str]:
    """Drop ``param = value`` lines for parameters the body never reads, when the value
    is plain (a name, a literal, an attribute): evaluating it has no effect to keep."""
    used = names_read("".join(code_of(s) for s in body) + (" " + code_of(returned) if returned is not None else ""))
    out = []
    for line in bindings:
        name, _, value = line.partition(" = ")
        if name not in used:
            try:
                expr = cst.parse_expression(value)
            except cst.ParserSyntaxError:
                expr = None
            if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Attribute)):
                continue
        out.append(line)
    return out


def _call_site(stmt: cst.CSTNode) -> tuple[cst.Call, str | None, cst.BaseExpression | None] | None:
    """(call, assignment target text or None, the whole value when the call is only its
    head) for ``f(...)``, ``t = f(...)`` and ``t = f(...)[:, :-1]`` / ``t = f(...).float()``
    lines: the call runs first in all of them."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value, None, None
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        head = _head_call(small.value)
        if head is not None:
            return head, code_of(small.targets[0].target), small.value
        if isinstance(small.value, cst.Call):
            return small.value, code_of(small.targets[0].target), None
    return None


def _call_sites(stmt: cst.CSTNode) -> list[tuple[cst.Call, str | None, cst.BaseExpression | None]]:
    """The calls of a line that inlining may replace, likeliest first: the call the line
    is (``f(x)``, ``t = f(x)``, ``t = f(x)[:, 1]``), else each call inside its value that
    runs exactly once and unconditionally (``loss = crit(f(x), y)``: not in a lambda, a
    comprehension's body, a branch of ``a if c else b`` or the right of ``and``/``or``),
    innermost first (its arguments hold no other call left to run before it)."""
    site = _call_site(stmt)
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return [] if site is None else [site]
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        value, target = small.value, code_of(small.targets[0].target)
    elif isinstance(small, cst.Expr):
        value, target = small.value, None
    else:
        return []
    found = _Unconditional()
    value.visit(found)
    # After the line's own call, the calls in its arguments: ``self.head =
    # nn.Sequential(nn.Linear(self.flat_dim(), h))`` inlines the user's method even
    # though the call the line is belongs to a library.
    inner = [(call, target, value) for call in found.calls if call is not value
             and (site is None or call is not site[0])]
    return ([] if site is None else [site]) + inner


class _Unconditional(cst.CSTVisitor):
    """Calls evaluated once and unconditionally by an expression, innermost first."""

    def __init__(self):
        self.calls: list[cst.Call] = []

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        node.test.visit(self)
        return False

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        node.left.visit(self)
        return False

    def visit_ListComp(self, node) -> bool:
        node.for_in.iter.visit(self)
        return False

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp

    def leave_Call(self, original_node: cst.Call) -> None:
        self.calls.append(original_node)


def _stands_alone(whole: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """Whether ``node`` is a whole argument, element or value in ``whole``, where any
    expression needs no parentheses."""
    found = []

    class Holder(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, (cst.Arg, cst.Element, cst.DictElement)) and n.value is node:
                found.append(n)
            return not found

    whole.visit(Holder())
    return bool(found) and not isinstance(found[0], cst.Arg) or (
        bool(found) and isinstance(found[0], cst.Arg) and not found[0].star
    )


def _rest_reads(whole: cst.BaseExpression, call: cst.Call) -> set[str]:
    """Names the expression reads outside ``call`` (not attribute names)."""
    names: set[str] = set()

    class Reads(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is call:
                return False
            if isinstance(node, cst.Name):
                names.add(node.value)
            if isinstance(node, cst.Attribute):
                node.value.visit(self)
                return False
            return True

    whole.visit(Reads())
    return names


def _body_binds(body: list[cst.BaseStatement], bindings: list[str]) -> set[str]:
    """Names an inlined body (with its parameter bindings) assigns."""
    bound = {line.split("=", 1)[0].strip() for line in bindings}
    return bound.union(*(bound_names(stmt) for stmt in body))


def _head_call(value: cst.BaseExpression) -> cst.Call | None:
    """The call a chain of subscripts, attributes and method calls starts from, when the
    other parts of the chain read nothing that the call's body could rebind."""
    node = value
    seen_suffix = False
    while True:
        if isinstance(node, cst.Subscript):
            if any(not _plain_slice(el) for el in node.slice):
                return None
            node, seen_suffix = node.value, True
        elif isinstance(node, cst.Attribute):
            node, seen_suffix = node.value, True
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args:
            node, seen_suffix = node.func.value, True  # ``.float()``, ``.contiguous()``
        else:
            break
    return node if seen_suffix and isinstance(node, cst.Call) else None


def _plain_slice(el: cst.SubscriptElement) -> bool:
    """``:``, ``:-1``, ``0``, ``None``, ``...``: indices made of literals only."""
    class Names(cst.CSTVisitor):
        found = False

        def visit_Name(self, node: cst.Name) -> None:
            if node.value not in ("None", "True", "False"):
                Names.found = True

        def visit_Call(self, node: cst.Call) -> None:
            Names.found = True

    checker = Names()
    el.visit(checker)
    return not Names.found


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.BaseExpression):
        self.old, self.new = old, new

    def on_leave(self, original_node, updated_node):
        if original_node is self.old:
            return self.new
        return updated_node


def _compose(
    bindings: list[str], body: list[cst.BaseStatement], returned, target: str | None, context: str | None = None
) -> str:
    stmts: list[cst.BaseStatement] = list(body)
    if returned is not None:
        value = code_of(returned)
        stmts.append(cst.parse_statement(f"{target} = {value}\n" if target is not None else f"{value}\n"))
    elif target is not None:
        stmts.append(cst.parse_statement(f"{target} = None\n"))
    if context is not None:
        if not stmts:
            stmts = [cst.SimpleStatementLine(body=[cst.Pass()])]
        stmts = [cst.With(items=[cst.WithItem(item=cst.parse_expression(context))], body=cst.IndentedBlock(body=stmts))]
    module = cst.Module(body=[cst.parse_statement(line + "\n") for line in bindings] + stmts)
    return module.code


class InlineCalls(LevelZeroPass):
    name = "inline-calls"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        out: list[Unit] = []
        for s in cand.editable():
            for call, target, whole in _call_sites(s.node):
                unit = self._unit(cand, s, call, target, whole)
                if unit is not None:
                    out.append(unit)
                    break  # one call per statement and round: the next rebase sees the rest
        return out

    def _unit(self, cand: Candidate, s, call: cst.Call, target: str | None, whole) -> Unit | None:
        program = cand.program
        deps = program.deps
        stmts = program.stmts
        if whole is None:
            unit = self._without_instance(cand, s, call, target)
            if unit is not None:
                return unit
        found = self._callee(cand, s.id, call)
        if found is None:
            return None
        callee_sid, fn, self_text = found
        if _is_inside(stmts, s.id, callee_sid):
            return None  # recursion
        parts = _body_of(fn)
        if parts is None:
            return None
        body, returned = parts
        bindings = _bindings(fn.params, call, skip_first=self_text is not None)
        if bindings is None:
            return None
        bindings = _used_bindings(bindings, body, returned)
        constructing = self_text is not None and self_text.endswith("()") and fn.name.value == "__init__"
        if whole is not None:
            if returned is None or constructing:
                return None
            # ``t = f(x)[:, :-1]``, ``loss = crit(f(x), y)``: the returned value takes
            # the call's place, after the body.  Not when the body rebinds a name the
            # rest of the line reads: the line would read the body's value instead.
            if _rest_reads(whole, call) & _body_binds(body, bindings):
                return None
            value = code_of(returned)
            # parse_expression parenthesises what is not an atom; a whole argument needs none
            pasted = cst.parse_expression(value) if _stands_alone(whole, call) else parse_expression(value)
            returned = whole.visit(_ReplaceNode(call, pasted))
        if constructing:
            if target is None or returned is not None:
                return None
            self_name = first_param(fn)
            if self_name is None:
                return None
            # ``model = nn.Module()``, then __init__'s body on ``self = model``.
            bindings[:0] = [f"{target} = {self_text}", f"{self_name} = {target}"]
            text = _compose(bindings, body, None, None, None)
            unit = [Edit("replace", s.id, text=text)]
            if deps.readers(callee_sid, stmts[callee_sid].node.name.value) == {s.id}:
                unit += deletion_unit(cand, [callee_sid], ignore=frozenset({s.id}), copied=True, new_text=text)
                return tuple(unit)
            return None
        if self_text is not None:
            self_name = first_param(fn)
            if self_name is None:
                return None
            if self_text != self_name:
                bindings.insert(0, f"{self_name} = {self_text}")
        _, context = decorator_context(fn) or (True, None)
        text = _compose(bindings, body, returned, target, context)
        unit = [Edit("replace", s.id, text=text)]
        if self_text is None and deps.readers(callee_sid, fn.name.value) == {s.id}:
            unit += deletion_unit(cand, [callee_sid], ignore=frozenset({s.id}), copied=True, new_text=text)
        elif self_text is not None:
            # Methods are reached through attributes (and ``forward`` through calls
            # of instances), which name resolution does not see; if this was not the
            # only call, the candidate fails and the unit is simply not taken.
            unit += deletion_unit(cand, [callee_sid], ignore=frozenset({s.id}), copied=True, new_text=text)
        return tuple(unit)

    def _without_instance(self, cand: Candidate, s, call: cst.Call, target: str | None) -> Unit | None:
        """``Evaluator(model, num_classes=5)`` whose instance nothing reads, of a class
        whose ``__init__`` (or a dataclass's ``__post_init__``) never touches the instance
        -> that body, with the parameters bound as the call binds them.  No object stands
        in for the instance: the body needs none (``self.acc = Accuracy(n)`` became
        ``Accuracy(n)`` when nothing read ``acc``, and the constructor is the call)."""
        program = cand.program
        deps = program.deps
        if not isinstance(call.func, cst.Name):
            return None
        if target is not None and not (
            isinstance(cst.parse_expression(target), cst.Name) and not deps.readers(s.id, target)
        ):
            return None
        binders = deps.binders(call.func)
        if len(binders) != 1 or (cls_sid := next(iter(binders))) not in cand.live:
            return None
        cls = program.stmts[cls_sid].node
        if not isinstance(cls, cst.ClassDef):
            return None
        members = {
            node.name.value: node for child in program.children.get(cls_sid, ())
            if child in cand.live and isinstance(node := program.stmts[child].node, cst.FunctionDef)
        }
        fn = instance_free_constructor(cls, members, call)
        bindings = [] if fn is None or fn.name.value != "__init__" else _bindings(fn.params, call, skip_first=True)
        parts = None if fn is None or bindings is None else _body_of(fn)
        if parts is None or parts[1] is not None or not parts[0]:
            return None
        body = parts[0]
        text = _compose(_used_bindings(bindings, body, None), body, None, None, None)
        unit = [Edit("replace", s.id, text=text)]
        if deps.readers(cls_sid, cls.name.value) == {s.id}:
            unit += deletion_unit(cand, [cls_sid], ignore=frozenset({s.id}), copied=True, new_text=text)
        return tuple(unit)

    def _constructor(self, cand: Candidate, cls_sid: int, cls: cst.ClassDef):
        """``model = Net(a)`` where ``Net(nn.Module)`` has nothing left but ``__init__``:
        an instance of the base class, then ``__init__``'s body with ``self`` bound to it.
        Returned as (the ``__init__`` statement, a FunctionDef to paste, "<base>()")."""
        program = cand.program
        if len(cls.bases) != 1 or cls.keywords or cls.decorators:
            return None
        methods = [c for c in program.children.get(cls_sid, ()) if c in cand.live]
        listed = _list_backed(program, cls, methods)
        if listed is not None:
            return cls_sid, listed, None
        if len(methods) != 1:
            return None
        init_sid = methods[0]
        init = program.stmts[init_sid].node
        if not isinstance(init, cst.FunctionDef) or init.name.value != "__init__" or init.decorators:
            return None
        if not isinstance(init.body, cst.IndentedBlock):
            return None
        body = list(init.body.body)
        if body and _is_super_init(body[0]):
            body = body[1:]
        elif any(_mentions_super(stmt) for stmt in body):
            return None
        new_body = init.body.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])
        return cls_sid, init.with_changes(body=new_body), (
            code_of(cls.bases[0].value) + "()"
        )

    def _callee(self, cand: Candidate, sid: int, call: cst.Call):
        """(statement of the def, the def, text bound to ``self`` or None)."""
        program = cand.program
        deps = program.deps
        stmts = program.stmts
        func = call.func
        if isinstance(func, cst.Name):
            binders = deps.binders(func)
            if len(binders) != 1:
                return None
            (b,) = binders
            node = stmts[b].node
            if isinstance(node, cst.FunctionDef) and b in cand.live and not _is_method(stmts, b):
                return b, node, None
            cls_sid = instance_class(cand, b)
            if cls_sid is not None:
                method = method_of(cand, cls_sid, "forward")  # ``model(x)`` runs forward
                return None if method is None else (*method, func.value)
            if isinstance(node, cst.ClassDef) and b in cand.live:
                return self._constructor(cand, b, node)
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = func.value
            # ``self.helper(x)`` inside a method: the method's own class.
            method_sid = _enclosing_method(stmts, sid)
            if method_sid is not None and first_param(stmts[method_sid].node) == owner.value:
                cls_sid = stmts[method_sid].parent
                method = method_of(cand, cls_sid, func.attr.value)
                return None if method is None else (*method, owner.value)
            # ``trainer.fit(...)`` where ``trainer = Trainer(...)``
            binders = deps.binders(owner)
            if len(binders) == 1 and stmts[next(iter(binders))].kind == "class":
                # ``Config.from_cli(argv)``: a class or static method of a local class;
                # ``cls`` is bound to the class, a static method binds nothing.
                found = class_method_of(cand, next(iter(binders)), func.attr.value)
                if found is None:
                    return None
                sid_m, node_m, kind = found
                return sid_m, node_m, (owner.value if kind == "class" else None)
            if len(binders) == 1:
                cls_sid = instance_class(cand, next(iter(binders)))
                if cls_sid is not None:
                    method = method_of(cand, cls_sid, func.attr.value)
                    return None if method is None else (*method, owner.value)
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name) and func.attr.value != "__init__"
        ):
            # ``Trainer(model).train_epoch(dl)``: an instance made for this one call, once
            # ``trainer = Trainer(model)`` was pasted where it was read; ``self`` is bound
            # to the construction, which runs first, as it did.
            binders = deps.binders(func.value.func)
            if len(binders) == 1 and (b := next(iter(binders))) in cand.live and stmts[b].kind == "class":
                method = method_of(cand, b, func.attr.value)
                return None if method is None else (*method, code_of(func.value))
        return None


def _list_backed(program, cls: cst.ClassDef, methods: list[int]) -> cst.FunctionDef | None:
    """For the ubiquitous list-backed dataset -- ``__init__`` sets ``self.items = E``,
    ``__len__`` returns ``len(self.items)``, ``__getitem__`` returns ``self.items[i]`` --
    a function ``Cls(params): return E``: anything that takes a dataset takes the list.
    None for any other class."""
    defs = {}
    for sid in methods:
        node = program.stmts[sid].node
        if not isinstance(node, cst.FunctionDef) or node.decorators:
            return None
        defs[node.name.value] = node
    if set(defs) != {"__init__", "__len__", "__getitem__"}:
        return None
    init = defs["__init__"]
    if not isinstance(init.body, cst.IndentedBlock):
        return None
    body = [b for b in init.body.body if not _is_super_init(b)]
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    assign = body[0].body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    self_name = first_param(init)
    if not (isinstance(target, cst.Attribute) and code_of(target.value) == self_name):
        return None
    attr = target.attr.value
    if code_of(assign.value).replace(" ", "").count(f"{self_name}.") or self_name in code_of(assign.value).split():
        return None
    len_ok = _single_return(defs["__len__"]) == f"len({first_param(defs['__len__'])}.{attr})"
    item = defs["__getitem__"]
    params = list(item.params.params)
    if len(params) != 2:
        return None
    item_ok = _single_return(item) == f"{params[0].name.value}.{attr}[{params[1].name.value}]"
    if not (len_ok and item_ok):
        return None
    stripped = init.params.with_changes(params=list(init.params.params)[1:])
    ret = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Return(value=assign.value)])])
    return init.with_changes(name=cls.name, params=stripped, body=ret)


def _single_return(fn: cst.FunctionDef) -> str | None:
    if not isinstance(fn.body, cst.IndentedBlock) or len(fn.body.body) != 1:
        return None
    stmt = fn.body.body[0]
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Return):
        value = stmt.body[0].value
        return None if value is None else code_of(value).replace(" ", "")
    return None


def _is_super_init(stmt: cst.CSTNode) -> bool:
    """``super().__init__()`` with no arguments (the base gets constructed bare)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    return isinstance(small, cst.Expr) and code_of(small.value).replace(" ", "") in (
        "super().__init__()",
        "super(self.__class__,self).__init__()",
    )


def _mentions_super(stmt: cst.CSTNode) -> bool:
    return "super(" in code_of(stmt) or "__init__" in code_of(stmt)


def _is_method(stmts, sid: int) -> bool:
    parent = stmts[sid].parent
    return parent is not None and stmts[parent].kind == "class"


def _enclosing_method(stmts, sid: int) -> int | None:
    cur = stmts[sid].parent
    while cur is not None:
        if stmts[cur].kind == "def":
            return cur if _is_method(stmts, cur) else None
        cur = stmts[cur].parent
    return None


def _is_inside(stmts, sid: int, ancestor: int) -> bool:
    cur = stmts[sid].parent
    while cur is not None:
        if cur == ancestor:
            return True
        cur = stmts[cur].parent
    return False


class _NameCount(cst.CSTVisitor):
    def __init__(self):
        self.counts: dict[str, int] = {}

    def visit_Name(self, node: cst.Name) -> None:
        self.counts[node.value] = self.counts.get(node.value, 0) + 1


_PLAIN = (cst.Name, cst.Integer, cst.Float, cst.SimpleString)


class InlineExpressions(LevelZeroPass):
    """``def tokenize(t): return re.findall(P, t.lower())`` and ``tokenize(text)`` ->
    ``re.findall(P, text.lower())``: one-line helpers called inside expressions (a
    comprehension, an argument), which statement inlining cannot reach.  All calls are
    replaced and the definition deleted in one unit; a helper that is also used as a
    value (``collate_fn=collate``) stays."""

    name = "inline-expressions"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        stmts = program.stmts
        out: list[Unit] = []
        for s in cand.editable():
            fn = s.node
            if s.kind != "def" or _is_method(stmts, s.id) or fn.decorators or fn.asynchronous is not None:
                continue
            parts = _body_of(fn)
            if parts is None or parts[0] or parts[1] is None:
                continue  # not a single ``return expr``
            returned = parts[1]
            params = list(fn.params.posonly_params) + list(fn.params.params)
            if fn.params.kwonly_params or fn.params.star_kwarg is not None or not isinstance(
                fn.params.star_arg, cst.MaybeSentinel
            ):
                continue
            counter = _NameCount()
            returned.visit(counter)
            reads = deps.reads(s.id, fn.name.value)
            if not reads:
                continue
            edits = []
            for name_node in reads:
                call = deps.call_of(name_node)
                if call is None:
                    edits = []
                    break  # used as a value: keep the function
                values = match_arguments(params, [], call)
                if values is None or any(
                    counter.counts.get(p, 0) > 1 and not isinstance(cst.parse_expression(v), _PLAIN)
                    for p, v in values.items()
                ):
                    edits = []
                    break  # an argument would be evaluated twice
                text = code_of(returned.visit(Substitute(values)))
                edits.append(Edit("expr", node=program.node_index(call), text=text))
            if not edits:
                continue
            users = frozenset(deps.enclosing(n) for n in reads)
            new_text = " ".join(e.text for e in edits)
            out.append((*edits, *deletion_unit(cand, [s.id], ignore=users, new_text=new_text)))
        return out




# Values that can take a name's place anywhere without parentheses.
_ATOMIC = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
    cst.ConcatenatedString, cst.FormattedString, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp,
    cst.SetComp,
)


class _Unsafe(cst.CSTVisitor):
    """Whether an expression does something that moving it would change beyond its
    value (binds a name, suspends a generator)."""

    def __init__(self):
        self.found = False

    def visit_NamedExpr(self, node) -> None:
        self.found = True

    def visit_Yield(self, node) -> None:
        self.found = True

    def visit_Await(self, node) -> None:
        self.found = True


class _OnceEvaluated(cst.CSTVisitor):
    """Whether ``target`` sits where its statement evaluates it once: not in a lambda,
    nor in a comprehension past its first iterable."""

    def __init__(self, target: cst.CSTNode):
        self.target = target
        self.depth = 0  # inside a lambda or a repeated part of a comprehension
        self.once: bool | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.target:
            self.once = self.depth == 0
            return False
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            # Only the first ``for``'s iterable runs once, in the enclosing scope.
            node.for_in.iter.visit(self)
            self.depth += 1
            for part in ("elt", "key", "value"):
                child = getattr(node, part, None)
                if child is not None:
                    child.visit(self)
            comp = node.for_in
            comp.target.visit(self)
            for cond in comp.ifs:
                cond.visit(self)
            if comp.inner_for_in is not None:
                comp.inner_for_in.visit(self)
            self.depth -= 1
            return False
        if isinstance(node, cst.Lambda):
            self.depth += 1
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, cst.Lambda):
            self.depth -= 1


def _header_holds(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Whether ``target`` is in the part of a statement that runs once per run of it: all
    of a simple line; the iterable of a ``for``, the test of an ``if``, a ``with``'s items."""
    if isinstance(node, cst.SimpleStatementLine):
        parts = [node]
    elif isinstance(node, cst.For):
        parts = [node.iter]
    elif isinstance(node, cst.If):
        parts = [node.test]
    elif isinstance(node, cst.With):
        parts = list(node.items)
    else:
        return False
    for part in parts:
        check = _OnceEvaluated(target)
        part.visit(check)
        if check.once is not None:
            return check.once
    return False


class InlineBindings(LevelZeroPass):
    """``logits = net(emb)`` followed, a few lines later in the same block, by the one
    read ``criterion(logits, target)`` -> ``criterion(net(emb), target)``: a name that
    only carries a value to one place.  A maintainer's repro reads
    ``nn.CrossEntropyLoss()(nn.Linear(32, 4)(x), y)``.

    Only where the value runs once either way (the read is not in a loop, a lambda or a
    comprehension's body that the binding is outside of) and nothing between the two
    statements mentions a name the value reads; whether moving the value past the
    statements in between mattered (a random draw, say) is the oracle's to say."""

    name = "inline-bindings"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        deps = program.deps
        stmts = program.stmts
        live = cand.live
        protected = program.protected
        modules = module_names(program)
        out: list[Unit] = []
        deleted: set[int] = set()  # bindings offered for removal in this round
        hosts: set[int] = set()  # statements a value is pasted into in this round
        for s, name, value, reads in single_bindings(cand):
            if s.id in protected or (s.parent is not None and stmts[s.parent].kind == "class"):
                continue
            if len(reads) != 1 or deps.readers(s.id, name) - {deps.enclosing(reads[0][0])}:
                continue
            read = reads[0][0]
            if deps.in_fstring(read) or deps.is_del_target(read):
                continue
            user = deps.enclosing(read)
            if user is None or user <= s.id or user not in live or user in cand.edit_of:
                continue
            u = stmts[user]
            if (u.parent, u.branch, u.file) != (s.parent, s.branch, s.file):
                continue  # another block: a loop body, a function
            if not _header_holds(u.node, read):
                continue
            unsafe = _Unsafe()
            value.visit(unsafe)
            if unsafe.found:
                continue
            moved = _outside_names(value) - modules
            between = [b for b in range(s.id + 1, user) if b in live]
            if any(_changes(program, b, moved) for b in between):
                continue
            if s.id in hosts or user in deleted:
                continue  # the other half of this pair is taken this round
            text = code_of(value)
            if not isinstance(value, _ATOMIC) and not value.lpar:
                text = f"({text})"
            deleted.add(s.id)
            hosts.add(user)
            out.append((Edit("expr", node=program.node_index(read), text=text), Edit("delete", s.id)))
        return out


def _outside_names(value: cst.BaseExpression) -> set[str]:
    """Names ``value`` reads from its surroundings: not builtins, not the names its own
    comprehensions and lambdas bind."""
    import builtins

    inner: set[str] = set()

    class Bound(cst.CSTVisitor):
        def visit_CompFor(self, node: cst.CompFor) -> None:
            inner.update(assigned_names(node.target))

        def visit_Lambda(self, node: cst.Lambda) -> None:
            inner.update(p.name.value for p in node.params.params)

    value.visit(Bound())
    return names_read(code_of(value)) - inner - set(dir(builtins))


def _changes(program, sid: int, names: set[str]) -> bool:
    """Whether statement ``sid`` may rebind or change in place one of ``names``: an
    assignment, an attribute or item store, a method call on it (``x.add_(1)``)."""
    import re

    deps = program.deps
    if any(sid in deps.binders_named.get(n, ()) for n in names):
        return True
    node = program.stmts[sid].node
    if mutated_names(node) & names:
        return True
    code = program.stmt_code(sid)
    return any(re.search(rf"\b{re.escape(n)}\b(\s*\[[^\]]*\])*\s*\.\s*\w+\s*\(", code) for n in names)


