"""Neighbours of a minimal case: the same program with one entry of the failing index
set to a boundary value, and with its loader's short and last batch.

After a fix, the minimal case is not enough (field guide, rule 7): the values around the
trigger must behave too.  For a class-index bug with ``C`` classes those are ``-1``,
``0``, ``C-1``, ``C`` and ``ignore_index``: the valid ones must run, the invalid ones
must be rejected (or no longer reach the operator).  The index argument of the failing
call is found in the source (``F.cross_entropy(logits, target)``,
``nn.CrossEntropyLoss()(logits, target)``, ``emb(tokens)``, ``torch.gather(x, 1, idx)``,
``x.gather(1, idx)``), and its first entry set to the value: right after the statement
that last assigns it before the call (or first thing in the loop that binds it), so
that a check placed between the two sees it; or, for an expression, in place.  The
neighbour ends right after the call's statement: it asks about that call only.

Pure text in, texts out (libcst): no torch, no processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

__all__ = ["INDEX_OPERATORS", "Neighbour", "index_neighbours", "loader_neighbours"]

# operator name -> (position of the index in the functional form, keyword, class of the
# module form, position in the module form)
INDEX_OPERATORS = {
    "cross_entropy": (1, "target", ("CrossEntropyLoss",), 1),
    "nll_loss": (1, "target", ("NLLLoss",), 1),
    "embedding": (0, "input", ("Embedding",), 0),
    "gather": (2, "index", (), None),
    "index_select": (2, "index", (), None),
    "scatter": (2, "index", (), None),
    "scatter_add": (2, "index", (), None),
    "index_add": (2, "index", (), None),
}


@dataclass(frozen=True)
class Neighbour:
    name: str  # "target with one entry 4", "a short batch (batch_size=1)"
    text: str
    valid: bool  # True: must run without error; False: must not reach the bug


def _callee_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


class _Sites(cst.CSTVisitor):
    """Calls of the failing operator, with where their index argument sits."""

    METADATA_DEPENDENCIES = (ParentNodeProvider, PositionProvider)

    def __init__(self, op: str):
        self.op = op
        self.module_names: set[str] = set()  # names bound to the operator's module form
        self.sites: list[tuple[cst.Call, cst.BaseExpression]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        spec = INDEX_OPERATORS[self.op]
        if isinstance(node.value, cst.Call) and _callee_name(node.value.func) in spec[2]:
            for target in node.targets:
                name = target.target
                if isinstance(name, cst.Name):
                    self.module_names.add(name.value)
                elif isinstance(name, cst.Attribute):
                    self.module_names.add(name.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        position, keyword, classes, module_position = INDEX_OPERATORS[self.op]
        func = node.func
        called = _callee_name(func)
        where: int | None
        if called == self.op:
            functional = isinstance(func, cst.Name) or (
                isinstance(func, cst.Attribute) and _root(func.value) in ("torch", "F", "functional", "nn")
            )
            where = position if functional else position - 1  # x.gather(1, idx): x is the input
        elif (isinstance(func, cst.Call) and _callee_name(func.func) in classes) or (
            called in self.module_names and not isinstance(func, cst.Call)
        ):
            where = module_position
        else:
            return
        if where is None or where < 0:
            return
        arg = _argument(node, where, keyword)
        if arg is not None:
            self.sites.append((node, arg))


def _root(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > position:
        return positional[position].value
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a.value
    return None


def _torch_name(module: cst.Module) -> str:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if alias.name.value == "torch" and alias.asname is None:
                            return "torch"
    return '__import__("torch")'


class _SetEverywhere(cst.CSTTransformer):
    """With ``name``: set it to the value right after each statement that binds it before
    the call's statement, in the blocks around the call.  Without: wrap the argument
    expression in place."""

    def __init__(self, arg: cst.BaseExpression, call_stmt: cst.CSTNode, setter: str, name: str | None):
        self.arg = arg
        self.call_stmt = call_stmt
        self.setter = setter
        self.name = name
        self.done = False

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._rewrite(original.body, list(updated.body)))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._rewrite(original.body, list(updated.body)))

    def _rewrite(self, original_body, body):
        """In the block around the call: the value set after the last binding of the
        name before the call; and the block ends right after the call's statement (the
        neighbour asks one question, the call with that value, whatever a partly reduced
        program has after it)."""
        index = next((i for i, s in enumerate(original_body) if _contains(s, self.call_stmt)), None)
        if index is None:
            return body
        if self.name is not None:
            last = max((i for i in range(index) if self.name in _bound_names(original_body[i])), default=None)
            if last is not None:
                self.done = True
                setting = cst.parse_statement(f"{self.name} = {self.setter.format(arg=self.name)}\n")
                body = [*body[: last + 1], setting, *body[last + 1 :]]
                index += 1
        if original_body[index if self.name is None or not self.done else index - 1] is self.call_stmt:
            stop = cst.parse_statement("raise SystemExit(0)  # shrinkgpu verify: the neighbour ends after the call\n")
            body = [*body[: index + 1], stop]
        return body

    def leave_For(self, original, updated):
        # ``for emb, target in loader:``: the value is set first thing in the body
        if self.name is not None and not self.done and self.name in _flatten(original.target):
            if _contains(original.body, self.call_stmt):
                return updated.with_changes(body=self._prepend(updated.body))
        return updated

    def leave_FunctionDef(self, original, updated):
        params = [p.name.value for p in (*original.params.posonly_params, *original.params.params,
                                          *original.params.kwonly_params)]
        if self.name is not None and not self.done and self.name in params and _contains(original.body, self.call_stmt):
            return updated.with_changes(body=self._prepend(updated.body))
        return updated

    def _prepend(self, block):
        self.done = True
        setting = cst.parse_statement(f"{self.name} = {self.setter.format(arg=self.name)}\n")
        return block.with_changes(body=[setting, *block.body])

    def on_leave(self, original_node, updated_node):
        if self.name is None and original_node is self.arg:
            self.done = True
            return cst.parse_expression(self.setter.format(arg=_code(original_node)))
        return super().on_leave(original_node, updated_node)


def _contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    found = False

    class Find(cst.CSTVisitor):
        def on_visit(self, n):
            nonlocal found
            if n is target:
                found = True
            return not found

    node.visit(Find())
    return found


def _bound_names(stmt: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                targets = [small.target]
            for t in targets:
                for n in _flatten(t):
                    names.add(n)
    return names


def _flatten(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _flatten(el.value)]
    return []


def index_neighbours(source: str, op: str, size: int, ignore_index: int | None = None) -> list[Neighbour]:
    """The program with the index argument of each call of ``op`` set to the boundary
    values of an index into ``size`` entries: ``-1``, ``0``, ``size-1``, ``size`` (and
    ``ignore_index`` for class targets).  Empty when no such call is in the source."""
    if op not in INDEX_OPERATORS or size < 1:
        return []
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return []
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Sites(op)
    wrapper.visit(finder)
    if not finder.sites:
        return []
    parents = wrapper.resolve(ParentNodeProvider)
    call, arg = finder.sites[0]
    stmt: cst.CSTNode = call
    while stmt in parents and not isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        stmt = parents[stmt]
    torch = _torch_name(module)
    values = [(-1, False), (0, True), (size - 1, True), (size, False)]
    if op in ("cross_entropy", "nll_loss"):
        values.append((-100 if ignore_index is None else ignore_index, True))
    out = []
    seen = set()
    for value, valid in values:
        if value in seen:
            continue
        seen.add(value)
        # one entry set, the others as the program makes them: a fixed pipeline's values
        # around one boundary value (every entry at ignore_index would be an empty batch)
        setter = f"{{arg}}.flatten().index_fill(0, {torch}.zeros(1, dtype={torch}.long), {value}).view_as({{arg}})"
        name = arg.value if isinstance(arg, cst.Name) else None
        transformer = _SetEverywhere(arg, stmt, setter, name)
        changed = wrapper.module.visit(transformer)
        if not transformer.done and name is not None:
            transformer = _SetEverywhere(arg, stmt, setter, None)  # bound elsewhere: in place
            changed = wrapper.module.visit(transformer)
        if transformer.done:
            role = "indices" if op == "embedding" else INDEX_OPERATORS[op][1]  # target, index
            out.append(Neighbour(f"{role} with one entry {value}", changed.code, valid))
    return out


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


class _Loader(cst.CSTTransformer):
    def __init__(self, mode: str):
        self.mode = mode
        self.done = False

    def leave_Call(self, original, updated):
        name = _callee_name(updated.func)
        if self.mode == "short" and name == "DataLoader" and updated.args:
            positional = [a for a in updated.args if a.keyword is None and not a.star]
            size = positional[1] if len(positional) > 1 else None  # DataLoader(ds, 32)
            args = [a for a in updated.args
                    if a is not size and not (a.keyword is not None and a.keyword.value == "batch_size")]
            self.done = True
            bare = ", ".join(_code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in args)
            return cst.parse_expression(f"{_code(updated.func)}({bare}, batch_size=1)")
        if self.mode == "last" and name == "next" and updated.args:
            inner = updated.args[0].value
            if isinstance(inner, cst.Call) and _callee_name(inner.func) == "iter" and inner.args:
                self.done = True
                return cst.parse_expression(f"list({_code(inner.args[0].value)})[-1]")
        return updated


def loader_neighbours(source: str) -> list[Neighbour]:
    """With a ``DataLoader``: one batch of one item (a short batch), and, where the
    program takes ``next(iter(loader))``, the loader's last batch instead."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return []
    out = []
    for mode, label in (("short", "a short batch (batch_size=1)"), ("last", "the last batch")):
        transformer = _Loader(mode)
        changed = module.visit(transformer)
        if transformer.done:
            out.append(Neighbour(label, changed.code, True))
    return out
