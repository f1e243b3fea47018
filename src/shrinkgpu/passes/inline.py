"""Calls into the user's own code replaced by the code they run.

A maintainer's repro is flat: no ``main()``, no ``train_one_epoch(...)``, the failing
steps one after the other.  This pass replaces a call statement (``f(a)`` or
``x = f(a)``) by the callee's body, with its parameters bound to the arguments, and a
call to a local ``nn.Module`` instance (``model(x)``) by its ``forward`` body with
``self`` bound to the instance.  The callee's own definition goes in the same unit when
this was its only call, so the unit shrinks the program.

Only bodies whose one ``return`` is the last statement are inlined: an early return
would need control flow the call site does not have.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, deletion_unit
from shrinkgpu.syntax.program import Candidate, Edit

_EMPTY = cst.Module(body=[])


def _code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


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


def _body_of(fn: cst.FunctionDef) -> tuple[list[cst.BaseStatement], cst.BaseExpression | None] | None:
    """The statements to paste and the returned expression, or None if not inlinable."""
    if fn.asynchronous is not None or fn.decorators:
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
        if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and last.body[0] is visitor.returns[0]):
            return None
        returned = visitor.returns[0].value
        stmts = stmts[:-1]
    return stmts, returned


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
    keyword_only = list(params.kwonly_params)
    values: dict[str, str] = {}
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if index >= len(positional):
                return None
            values[positional[index].name.value] = _code(arg.value)
            index += 1
        else:
            values[arg.keyword.value] = _code(arg.value)
    lines = []
    for p in positional + keyword_only:
        name = p.name.value
        if name in values:
            value = values.pop(name)
        elif p.default is not None:
            value = _code(p.default)
        else:
            return None
        if value != name:  # ``x = x`` says nothing
            lines.append(f"{name} = {value}")
    if values:
        return None  # a keyword the function does not take
    return lines


def _call_site(stmt: cst.CSTNode) -> tuple[cst.Call, str | None] | None:
    """(call, assignment target text or None) for ``f(...)`` or ``t = f(...)`` lines."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value, None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
        return small.value, _code(small.targets[0].target)
    return None


def _compose(bindings: list[str], body: list[cst.BaseStatement], returned, target: str | None) -> str:
    parts = [line + "\n" for line in bindings]
    parts += [_code(s) if _code(s).endswith("\n") else _code(s) + "\n" for s in body]
    if returned is not None:
        value = _code(returned)
        parts.append(f"{target} = {value}\n" if target is not None else f"{value}\n")
    elif target is not None:
        parts.append(f"{target} = None\n")
    return "".join(parts)


class InlineCalls(LevelZeroPass):
    name = "inline-calls"

    def edits(self, cand: Candidate) -> list[Unit]:
        if cand.edits:
            return []  # the texts below are the original's; wait for the next rebase
        program = cand.program
        deps = program.deps
        stmts = program.stmts
        out: list[Unit] = []
        for s in cand.editable():
            site = _call_site(s.node)
            if site is None:
                continue
            call, target = site
            found = self._callee(cand, s.id, call)
            if found is None:
                continue
            callee_sid, fn, self_text = found
            if _is_inside(stmts, s.id, callee_sid):
                continue  # recursion
            parts = _body_of(fn)
            if parts is None:
                continue
            body, returned = parts
            bindings = _bindings(fn.params, call, skip_first=self_text is not None)
            if bindings is None:
                continue
            if self_text is not None:
                bindings.insert(0, f"self = {self_text}")
            text = _compose(bindings, body, returned, target)
            unit = [Edit("replace", s.id, text=text)]
            if self_text is None and deps.readers(callee_sid, fn.name.value) == {s.id}:
                unit += deletion_unit(cand, [callee_sid], ignore=frozenset({s.id}), copied=True)
            elif self_text is not None:
                # ``forward`` is only reached through calls of instances; if this was not
                # the only one, the candidate fails and the unit is not taken.
                unit += deletion_unit(cand, [callee_sid], ignore=frozenset({s.id}), copied=True)
            out.append(tuple(unit))
        return out

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
            if isinstance(node, cst.FunctionDef) and b in cand.live:
                return b, node, None
            if isinstance(node, cst.SimpleStatementLine):
                return self._module_instance(cand, func, b, node)
        return None

    def _module_instance(self, cand: Candidate, func: cst.Name, binder: int, node: cst.SimpleStatementLine):
        """``model(x)`` where ``model = LocalModule(...)``: its ``forward``."""
        program = cand.program
        stmts = program.stmts
        if len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
            return None
        value = node.body[0].value
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
            return None
        classes = program.deps.binders(value.func)
        if len(classes) != 1:
            return None
        (cls_sid,) = classes
        cls = stmts[cls_sid].node
        if not isinstance(cls, cst.ClassDef) or cls_sid not in cand.live:
            return None
        for child in program.children.get(cls_sid, ()):
            child_node = stmts[child].node
            if isinstance(child_node, cst.FunctionDef) and child_node.name.value == "forward":
                return child, child_node, func.value
        return None


def _is_inside(stmts, sid: int, ancestor: int) -> bool:
    cur = stmts[sid].parent
    while cur is not None:
        if cur == ancestor:
            return True
        cur = stmts[cur].parent
    return False
