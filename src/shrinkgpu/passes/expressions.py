"""Smaller expressions: wrapper calls dropped, constant conditions decided, keyword
arguments left at their defaults, layers after the failing call peeled off, entries of
dict literals (records nobody reads) and of lists of objects (``ConcatDataset([a, b])``)
removed, sizes shrunk.

Each is checked like any other candidate, so a keyword that mattered (``padding=1``
changes a shape at the suspect operator) simply stays.  A node can have several
alternatives (``act(fc(h))`` -> ``fc(h)``, or -> ``act``): level k offers every node's
k-th alternative, so alternatives for one node never meet in one candidate.
"""

from __future__ import annotations

import ast
from typing import Sequence

import libcst as cst

from shrinkgpu.passes.base import EditPass, Unit, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.placeholders import (
    call_arguments_unused,
    is_stand_in,
    read_as_receiver,
)
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import header_parts, module_names

_SIMPLE = (cst.Call, cst.Name, cst.Attribute, cst.Subscript)
# Allocators of uninitialised memory: ``torch.empty(n).uniform_(a, b)`` must not become
# ``torch.empty(n)``, whose values differ from run to run (and process to process).
_UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
# Keywords that let a file operation find its work done (``os.makedirs(d, exist_ok=True)``):
# every candidate runs in a clean copy of the directory, where they never matter, so
# without them the result would fail otherwise the second time a user runs it.
_RERUNNABLE = frozenset({"exist_ok", "dirs_exist_ok", "missing_ok", "ignore_errors"})


def _allocates_uninitialised(node: cst.BaseExpression) -> bool:
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    return name in _UNINITIALISED



_FOLDABLE = (
    cst.Integer, cst.Float, cst.SimpleString, cst.Name, cst.BinaryOperation, cst.Comparison,
    cst.UnaryOperation, cst.BooleanOperation, cst.ComparisonTarget,
)


def fold(node: cst.BaseExpression) -> str | None:
    """The value of an expression made only of literals and operators (``16 + 1``,
    ``0 != 0``), as source; None when it has names, calls or is already a literal."""

    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)):
        return None
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "len"
        and len(node.args) == 1
        and isinstance(node.args[0].value, (cst.List, cst.Tuple, cst.Set, cst.Dict))
        and not any(getattr(el, "star", None) for el in getattr(node.args[0].value, "elements", ()))
    ):
        return str(len(node.args[0].value.elements))  # ``len(["a", "b"])`` -> 2
    ok = True

    class Check(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            nonlocal ok
            if isinstance(n, cst.Name) and n.value not in ("True", "False", "None"):
                ok = False
            if isinstance(n, (cst.Call, cst.Attribute, cst.Subscript, cst.Lambda, cst.FormattedString)):
                ok = False
            return ok

    node.visit(Check())
    if not ok:
        return None
    source = code_of(node)
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow):
            return None  # 10 ** 10 ** 10
    try:
        value = eval(compile(tree, "<fold>", "eval"), {"__builtins__": {}}, {})
    except Exception:
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if not isinstance(value, (bool, int, float, str)) or (isinstance(value, str) and len(value) > 40):
        return None
    text = repr(value)
    return text if len(text) < len(source) or isinstance(value, bool) else None


_COMPREHENSION_NODES = None


def fold_comprehension(node: cst.BaseExpression) -> str | None:
    """The value of a comprehension over literals (``{k: v for k, v in {"a": 1, "name":
    "x"}.items() if k != "name"}`` -> ``{'a': 1}``), as source, when it is shorter; None
    when it reads any name but its own targets or calls anything but ``.items()``,
    ``.keys()``, ``.values()`` of a literal (a restricted evaluation: no builtins)."""

    global _COMPREHENSION_NODES
    if _COMPREHENSION_NODES is None:
        _COMPREHENSION_NODES = (
            ast.Expression, ast.DictComp, ast.ListComp, ast.SetComp, ast.comprehension, ast.Dict, ast.List,
            ast.Tuple, ast.Set, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Compare, ast.BoolOp, ast.UnaryOp,
            ast.BinOp, ast.IfExp, ast.Subscript, ast.Slice, ast.Call, ast.Attribute, ast.cmpop, ast.boolop,
            ast.unaryop, ast.operator,
        )
    source = code_of(node).strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return None
    bound = {n.id for c in ast.walk(tree) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
             if isinstance(n, ast.Name)}
    for n in ast.walk(tree):
        if not isinstance(n, _COMPREHENSION_NODES) or isinstance(n, ast.Pow):
            return None
        if isinstance(n, ast.Name) and n.id not in bound:
            return None
        if isinstance(n, ast.Call):
            if n.args or n.keywords or not isinstance(n.func, ast.Attribute):
                return None
            if n.func.attr not in ("items", "keys", "values") or not isinstance(n.func.value, ast.Dict):
                return None
        if isinstance(n, ast.Attribute) and not any(isinstance(c, ast.Call) and c.func is n for c in ast.walk(tree)):
            return None
    try:
        value = eval(compile(tree, "<fold>", "eval"), {"__builtins__": {}}, {})
    except Exception:  # whatever the literal evaluation raises, there is no value to paste
        return None
    text = repr(value)
    try:
        if ast.literal_eval(text) != value:
            return None
    except (ValueError, SyntaxError):
        return None
    return text if len(text) < len(source) else None


class _Substitute(cst.CSTTransformer):
    """A name read replaced by a value (an attribute's name and a keyword stay)."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name):
        return cst.parse_expression(self.value) if updated_node.value == self.name else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg):
        return updated_node.with_changes(keyword=original_node.keyword)


def one_iteration(node: cst.ListComp) -> str | None:
    """``[f(i) for i in range(0, 1, 1)]`` -> ``[f(0)]``: a comprehension over a range of
    one value is that one element (what cutting a length to 1 leaves)."""
    comp = node.for_in
    it = comp.iter
    if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None or not isinstance(comp.target,
                                                                                                      cst.Name):
        return None
    if not (isinstance(it, cst.Call) and code_of(it.func) == "range" and it.args
            and all(a.keyword is None and not a.star for a in it.args)):
        return None
    try:
        values = range(*[int(ast.literal_eval(code_of(a.value))) for a in it.args])
    except (ValueError, SyntaxError, TypeError):
        return None
    if len(values) != 1:
        return None
    inner = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Lambda)
    if any(isinstance(n, inner) for n in _descendants(node.elt)):
        return None  # a scope of its own might bind the same name
    return "[" + code_of(node.elt.visit(_Substitute(comp.target.value, str(values[0])))) + "]"


def _descendants(node: cst.CSTNode):
    for child in node.children:
        yield child
        yield from _descendants(child)


class _Collect(cst.CSTVisitor):
    def __init__(self):
        self.calls: list[cst.Call] = []
        self.ifexps: list[cst.IfExp] = []
        self.nots: list[cst.UnaryOperation] = []
        self.containers: list[cst.Dict] = []
        self.foldable: list[cst.BaseExpression] = []
        self.integers: list[cst.Integer] = []
        self.binops: list[cst.BinaryOperation] = []
        self.slices: list[cst.Subscript] = []
        self.picks: list[tuple[cst.Subscript, str]] = []

    def visit_Integer(self, node: cst.Integer) -> None:
        if not self._in_literal:
            self.integers.append(node)

    # Numbers inside list/tuple/dict literals are data (``[0, 2, 4]``), not sizes.
    _in_literal = 0

    def visit_Element(self, node) -> None:
        self._in_literal += 1  # (also inside ``[nn.Linear(4, 2)]``: sizes stay then)

    def leave_Element(self, node) -> None:
        self._in_literal -= 1

    def visit_DictElement(self, node) -> None:
        self._in_literal += 1

    def leave_DictElement(self, node) -> None:
        self._in_literal -= 1

    def visit_BinaryOperation(self, node) -> bool:
        going_on = self._fold(node)
        if going_on:
            self.binops.append(node)
        return going_on

    def visit_Comparison(self, node) -> bool:
        return self._fold(node)

    def visit_BooleanOperation(self, node) -> bool:
        return self._fold(node)

    def visit_Call(self, node: cst.Call) -> bool:
        self.calls.append(node)
        if isinstance(node.func, cst.Name) and node.func.value == "len":
            return self._fold(node)
        return True

    def visit_DictComp(self, node) -> bool:
        going_on = self._fold(node, fold_comprehension)
        if going_on:
            same = _copied_mapping(node)
            if same is not None:
                self.foldable.append((node, same))
        return going_on

    def visit_ListComp(self, node) -> bool:
        going_on = self._fold(node, fold_comprehension)
        if going_on:
            once = one_iteration(node)
            if once is not None:
                self.foldable.append((node, once))
        return going_on

    def _fold(self, node, how=fold) -> bool:
        text = how(node)
        if text is not None:
            self.foldable.append((node, text))
            return False
        return True

    def visit_Dict(self, node: cst.Dict) -> None:
        self.containers.append(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # ``{"ids": x, "mask": m}["ids"]`` -> ``x`` (what inlining a batch dict leaves);
        # only when the other values are plain: their effects would go with them.
        if isinstance(node.value, cst.Dict) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            if isinstance(key, cst.SimpleString):
                picked = [
                    el.value for el in node.value.elements
                    if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                    and el.key.evaluated_value == key.evaluated_value
                ]
                others = [el for el in node.value.elements
                          if not (isinstance(el, cst.DictElement) and el.value in picked)]
                if len(picked) == 1 and all(
                    isinstance(el, cst.DictElement)
                    and isinstance(el.value, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString))
                    for el in others
                ):
                    self.picks.append((node, code_of(picked[0])))
        # ``xs[:n]``, ``xs[1:]``: one plain slice, of anything but a module attribute.
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
            sl = node.slice[0].slice
            if (sl.step is None
                    and isinstance(node.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.ListComp))):
                self.slices.append(node)

    def visit_List(self, node: cst.List) -> None:
        # Lists of objects (``[curated, vendor]``, ``[aug1, aug2]``), not lists of data.
        if all(isinstance(el, cst.Element)
                and isinstance(el.value, (cst.Name, cst.Call, cst.Attribute)) for el in node.elements):
            self.containers.append(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self.nots.append(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.ifexps.append(node)

    # Nested statements are statements of their own: their expressions are collected there.
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> bool:
        return False


def _truth(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value == "True"
    if isinstance(node, cst.Integer):
        return int(node.value, 0) != 0
    folded = fold(node)
    if folded in ("True", "False"):
        return folded == "True"
    return None


def _first_of_iteration(call: cst.Call) -> str | None:
    """The first element of ``next(iter(C))`` where ``C`` is a list or tuple literal, or a
    container built from one (``nn.ModuleList([a, b])``, ``nn.Sequential(a, b)``, whose
    iteration yields its arguments in order)."""
    if code_of(call.func) != "next" or len(call.args) != 1:
        return None
    inner = call.args[0].value
    if not (isinstance(inner, cst.Call) and code_of(inner.func) == "iter" and len(inner.args) == 1):
        return None
    container = inner.args[0].value
    elements: Sequence[cst.BaseElement | cst.Arg] = ()
    if isinstance(container, (cst.List, cst.Tuple)):
        elements = container.elements
    elif isinstance(container, cst.Call) and code_of(container.func).rsplit(".", 1)[-1] in ("ModuleList", "Sequential"):
        if code_of(container.func).endswith("ModuleList"):
            if len(container.args) == 1 and isinstance(container.args[0].value, (cst.List, cst.Tuple)):
                elements = container.args[0].value.elements
        else:
            elements = container.args
    if not elements or isinstance(elements[0], cst.StarredElement) or getattr(elements[0], "star", "") \
            or getattr(elements[0], "keyword", None) is not None:
        return None
    return code_of(elements[0].value)


def alternatives(stmt: cst.CSTNode, sizes: Sequence[int] = ()) -> list[tuple[cst.CSTNode, list[tuple[str, str]]]]:
    """(node, [(op, text)...]) in priority order, for the expressions of one statement;
    one entry per node, so a node's alternatives are spread over levels and never meet.
    ``sizes``: the integer literals of the program, which a size may be shrunk to."""
    merged: dict[int, tuple[cst.CSTNode, list[tuple[str, str]]]] = {}
    for node, options in _alternatives(stmt, sizes):
        entry = merged.setdefault(id(node), (node, []))
        entry[1].extend(o for o in options if o not in entry[1])
    return list(merged.values())


def _alternatives(stmt: cst.CSTNode, sizes: Sequence[int] = ()) -> list[tuple[cst.CSTNode, list[tuple[str, str]]]]:
    collect = _Collect()
    for part in header_parts(stmt):
        part.visit(collect)
    out: list[tuple[cst.CSTNode, list[tuple[str, str]]]] = []
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        # ``rt = sum(...) / math.sqrt(L) + noise`` -> ``rt = 0``: values nobody checks.
        if (
            isinstance(small, cst.Assign)
            and not isinstance(small.value, (cst.Integer, cst.Name))
            and not any(isinstance(t.target, (cst.Tuple, cst.List)) for t in small.targets)  # ``x, y = 0`` cannot run
        ):
            out.append((small.value, [("expr", "0")]))
    for node, text in collect.foldable:
        out.append((node, [("expr", text)]))
    for neg in collect.nots:
        truth = _truth(neg.expression)
        if truth is not None:
            out.append((neg, [("expr", "False" if truth else "True")]))
    for ifexp in collect.ifexps:
        truth = _truth(ifexp.test)
        if truth is not None:
            out.append((ifexp, [("expr", code_of(ifexp.body if truth else ifexp.orelse))]))
        else:
            # ``a if cond else b`` -> one branch: the condition did not decide the bug
            out.append((ifexp, [("expr", code_of(ifexp.body)), ("expr", code_of(ifexp.orelse))]))
    for call in collect.calls:
        options: list[tuple[str, str]] = []
        positional = [a for a in call.args if a.keyword is None and not a.star]
        # ``sys.exit(main())``, ``act(fc(h))`` -> the inner call.
        if len(positional) == 1 and isinstance(positional[0].value, _SIMPLE):
            options.append(("expr", code_of(positional[0].value)))
        # ``F.mse_loss(step(x), y)`` -> ``step(x)``: a call whose argument is where the
        # failing computation happens (the loss around it, a print, a stack)
        elif len(positional) > 1:
            options += [("expr", code_of(a.value)) for a in positional[:2] if isinstance(a.value, cst.Call)]
        # ``ConcatDataset([vendor])``, ``torch.cat([x])`` -> the one element.
        if len(positional) == 1 and isinstance(positional[0].value, (cst.List, cst.Tuple)):
            elements = positional[0].value.elements
            if len(elements) == 1 and isinstance(elements[0], cst.Element) and isinstance(elements[0].value, _SIMPLE):
                options.append(("expr", code_of(elements[0].value)))
        # ``y.squeeze(-1)`` -> ``y``: reshapes after the failing call are not the trigger.
        if (
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, _SIMPLE)
            and not _allocates_uninitialised(call.func.value)
        ):
            options.append(("expr", code_of(call.func.value)))
        # ``model(**{"input_ids": x})`` -> ``model(input_ids=x)``: what a dictionary
        # literal (often what config-to-literal left) splats is keywords, written as such.
        splat = _splat_as_keywords(call)
        if splat is not None:
            options.append(("expr", splat))
        # ``vars(argparse.Namespace(lr=0.1))`` -> ``{"lr": 0.1}``: what parse_args became
        # (argparse-values), read back as the dictionary a config class is built from.
        # (first: it is the same value written plainly, where the others are cuts)
        namespace = _namespace_dict(call)
        if namespace is not None:
            options.insert(0, ("expr", namespace))
        # ``(lambda p: decode(model, p))(x)`` -> ``decode(model, x)``: a callback the
        # library cut or inlining left called in place.
        applied = _applied_lambda(call)
        if applied is not None:
            options.insert(0, ("expr", applied))
        # ``next(iter(nn.ModuleList([conv])))`` -> ``conv``: what a loop over a container
        # of one element became once the loop went (loop-to-first-iteration).
        first = _first_of_iteration(call)
        if first is not None:
            options.insert(0, ("expr", first))
        if options:
            out.append((call, options))
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in _RERUNNABLE:
                continue
            if arg.keyword is not None or arg.star == "**":
                out.append((arg, [("remove", "")]))
        # ``nn.Sequential(a, b, c, d)``: cut to the layers that matter.
        name = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", None)
        if name in ("Sequential", "ModuleList") and len(call.args) > 1:
            for arg in call.args:
                if arg.keyword is None and not arg.star:
                    out.append((arg, [("remove", "")]))
    for sub, text in collect.picks:
        out.append((sub, [("expr", text)]))
    for sub in collect.slices:
        # ``xs[:32]`` -> ``xs``: a slice the data already fits.
        out.append((sub, [("expr", code_of(sub.value))]))
    for binop in collect.binops:
        # ``0.3 * torch.randn(n, d)`` -> ``torch.randn(n, d)``, ``base + offset`` -> one of
        # them: scalings and offsets keep dtype and shape, which is what the bug sees.
        literal = (cst.Integer, cst.Float, cst.SimpleString)
        sides = [side for side in (binop.left, binop.right) if not isinstance(side, literal)]
        sides.sort(key=lambda side: -len(code_of(side)))
        if sides:
            out.append((binop, [("expr", code_of(side)) for side in sides]))
    for number in collect.integers:
        # ``range(3)`` -> ``range(1)``, ``epochs=10`` -> 1: fewer steps run, and the
        # signature tells whether the size mattered (a shape at the operator).
        value = int(number.value) if number.value.isdigit() else 0
        options = [("expr", "1")] if value >= 2 else []
        if value >= 4:
            options.append(("expr", str(value // 2)))
        # ``n_vendor=48`` -> ``32``: a size often has to match another one (the batch
        # size the data is sliced to), which is a literal elsewhere in the program.
        below = sorted({k for k in sizes if 2 <= k < value and k != value // 2}, reverse=True)[:2]
        options += [("expr", str(k)) for k in below]
        if options:
            out.append((number, options))
    for container in collect.containers:
        elements = container.elements
        if len(elements) > 1:
            for el in elements:
                out.append((el, [("remove", "")]))
    return out


def _splat_as_keywords(call: cst.Call) -> str | None:
    """The call with each ``**{"name": value}`` of a dictionary literal written as
    ``name=value`` keywords; None when it has none, or a key is no identifier (or is
    given twice)."""
    import keyword

    given = {a.keyword.value for a in call.args if a.keyword is not None}
    args: list[cst.Arg] = []
    changed = False
    for arg in call.args:
        if arg.star != "**" or not isinstance(arg.value, cst.Dict):
            args.append(arg)
            continue
        for el in arg.value.elements:
            if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)):
                return None
            key = el.key.evaluated_value
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key) or key in given:
                return None
            given.add(key)
            args.append(cst.Arg(keyword=cst.Name(key), value=el.value,
                                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                      whitespace_after=cst.SimpleWhitespace(""))))
        changed = True
    if not changed:
        return None
    return code_of(call.with_changes(args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]))


def _copied_mapping(node: cst.DictComp) -> str | None:
    """``E`` for ``{k: v for k, v in E.items()}``: a comprehension that copies a mapping
    as it is (what is left of one that renamed its keys)."""
    if not (isinstance(node.key, cst.Name) and isinstance(node.value, cst.Name) and node.key.value != node.value.value):
        return None
    comp = node.for_in
    if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
        return None
    target = comp.target
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
            and [getattr(el.value, "value", None) for el in target.elements] == [node.key.value, node.value.value]):
        return None
    it = comp.iter
    if not (isinstance(it, cst.Call) and not it.args and isinstance(it.func, cst.Attribute)
            and it.func.attr.value == "items"):
        return None
    return code_of(it.func.value)


def _namespace_dict(call: cst.Call) -> str | None:
    """``{"lr": 0.1, "steps": 2}`` for ``vars(argparse.Namespace(lr=0.1, steps=2))``."""
    if not (isinstance(call.func, cst.Name) and call.func.value == "vars" and len(call.args) == 1):
        return None
    inner = call.args[0].value
    if call.args[0].keyword is not None or call.args[0].star or not isinstance(inner, cst.Call):
        return None
    func = inner.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    if name != "Namespace" or any(a.keyword is None or a.star for a in inner.args):
        return None
    return "{" + ", ".join(f"{a.keyword.value!r}: {code_of(a.value).strip()}" for a in inner.args) + "}"  # type: ignore[union-attr]


_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString, cst.List,
           cst.Dict)


def _applied_lambda(call: cst.Call) -> str | None:
    """The body of ``(lambda a, b: body)(x, y)`` with each parameter replaced by its
    argument, when every argument is positional and each parameter is read at most once
    (an argument is then evaluated at most once, as before); None otherwise."""
    func = call.func
    if not isinstance(func, cst.Lambda):
        return None
    params = func.params
    if (params.star_arg is not cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg
            or params.posonly_params):
        return None
    names = [p.name.value for p in params.params]
    if any(p.default is not None for p in params.params) or len(call.args) != len(names):
        return None
    if any(a.keyword is not None or a.star for a in call.args):
        return None
    reads = [n.value for n in _descendants(func.body) if isinstance(n, cst.Name)]
    if any(reads.count(n) > 1 for n in names):
        return None
    body: cst.CSTNode = func.body
    for name, arg in zip(names, call.args):
        if name in reads:
            text = code_of(arg.value).strip()
            atomic = isinstance(arg.value, _ATOMIC) or (isinstance(arg.value, cst.Tuple) and arg.value.lpar)
            body = body.visit(_Substitute(name, text if atomic else f"({text})"))
    return code_of(body).strip()


def _integer_literals(program) -> frozenset[int]:
    """Every decimal integer literal in the program's files."""
    import re

    found: set[int] = set()
    for text in program.texts.values():
        found.update(int(m) for m in re.findall(r"(?<![\w.])[1-9]\d{0,5}(?![\w.])", text))
    return frozenset(found)


def _unread_target(program, s) -> str | None:
    """The value of ``name = value`` as a statement of its own, when nothing reads
    ``name`` and the value is a call (a value without effects is simply deleted); the
    calls of a display, in order, for ``metrics = {"loss": t.train_epoch(dl), "n": 3}``
    (a call inside a display is no statement that ``inline-calls`` could inline)."""
    node = s.node
    if s.kind != "simple" or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
        return None
    assign = node.body[0]
    if len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        names = [target.value]
    elif isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(el, cst.Element) and isinstance(el.value, cst.Name) for el in target.elements
    ):
        # ``g, p = decode(x)``: unpacking what the call returns may raise, but the call
        # raised first or nothing reads the names
        if not isinstance(assign.value, cst.Call):
            return None
        names = [el.value.value for el in target.elements]  # type: ignore[attr-defined]
    else:
        return None
    calls = _display_calls(assign.value) if not isinstance(assign.value, cst.Call) else [assign.value]
    if not calls:
        return None
    if any(program.deps.readers(s.id, n) for n in names):
        return None
    return "".join(code_of(c).strip() + "\n" for c in calls)


_PLAIN = (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)


def _display_calls(value: cst.BaseExpression) -> list[cst.Call]:
    """The calls a dict, list, tuple or set display holds, in the order they run; empty
    unless every other part is a name or a literal (a subscript, an attribute or an
    operator could raise, and dropping it would drop that)."""
    if isinstance(value, cst.Dict):
        parts = []
        for el in value.elements:
            if not isinstance(el, cst.DictElement):
                return []
            parts += [el.key, el.value]
    elif isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        if any(isinstance(el, cst.StarredElement) for el in value.elements):
            return []
        parts = [el.value for el in value.elements]
    else:
        return []
    if not all(isinstance(p, (cst.Call, *_PLAIN)) for p in parts):
        return []
    return [p for p in parts if isinstance(p, cst.Call)]


def _identifier_counts(program) -> dict[str, int]:
    """How often each identifier is written in the program's files (comments and
    strings included: the safe side for "is this attribute read anywhere?")."""
    import re
    from collections import Counter

    counts: Counter[str] = Counter()
    for text in program.texts.values():
        counts.update(re.findall(r"[^\W\d]\w*", text))
    return counts


def _unread_store(program, s, counts: dict[str, int]) -> str | None:
    """The value of ``obj.attr = value`` as a statement of its own, when the value is a
    call and the program names ``attr`` nowhere else: ``self.acc = Accuracy()`` ->
    ``Accuracy()``.  A constructor that raises inside a method leaves exactly this, and
    the receiver (``self``, or the ``0`` a reduction put there) is then read by nothing."""
    node = s.node
    if s.kind != "simple" or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
        return None
    assign = node.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
        return None
    target = assign.targets[0].target
    if not isinstance(target, cst.Attribute) or counts.get(target.attr.value, 0) > 1:
        return None
    return code_of(assign.value).strip() + "\n"


def _argument_calls(call: cst.Call) -> list[cst.Call] | None:
    """The calls among ``call``'s arguments, and in the displays it is given
    (``callbacks=[MetricsCallback(4)]``), in the order they run; None when another
    argument could raise as it is evaluated (a subscript, an attribute, an operator)."""
    out: list[cst.Call] = []
    for arg in call.args:
        value = arg.value
        if isinstance(value, cst.Call):
            out.append(value)
        elif isinstance(value, (cst.Dict, cst.List, cst.Tuple, cst.Set)):
            inner = _display_calls(value)
            if not inner and not all(isinstance(p, _PLAIN) for p in _display_parts(value)):
                return None
            out += inner
        elif not isinstance(value, _PLAIN):
            return None
    return out


def _display_parts(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(value, cst.Dict):
        return [p for el in value.elements if isinstance(el, cst.DictElement) for p in (el.key, el.value)]
    return [el.value for el in getattr(value, "elements", ())]


def _uncallable(program, s) -> str | None:
    """``Trainer(model, opt, callbacks=[MetricsCallback(4)])`` of a class that takes no
    arguments (``class Trainer: pass``, what deleting its ``__init__`` left) -> the calls
    in its arguments, one per line: the call itself can only raise ``TypeError``, so a
    program that fails as the original did fails in an argument, and the rest of the
    call is stand-ins (``0`` for the model) that no code reads."""
    node = s.node
    if s.kind != "simple" or len(node.body) != 1:
        return None
    small = node.body[0]
    named = isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
    if not (isinstance(small, cst.Expr) or named):
        return None
    call = small.value
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    deps = program.deps

    def resolve(name: cst.Name):
        binders = deps.binders(name)
        if len(binders) != 1:
            return None
        stmt = program.stmts[next(iter(binders))]
        return stmt.node if stmt.kind in ("def", "class") else None

    definition = resolve(call.func)
    if definition is None or not call_arguments_unused(call, definition, resolve):
        return None
    calls = _argument_calls(call)
    if not calls:
        return None  # nothing raises before the call: its ``TypeError`` would be the bug
    return "".join(code_of(c).strip() + "\n" for c in calls)


def _stands_in(text: str) -> bool:
    try:
        return is_stand_in(cst.parse_expression(text))
    except cst.ParserSyntaxError:
        return False


def _receiver_values(program, stmts) -> set[int]:
    """The values of ``name = value`` lines whose ``name`` is then used as an object: no
    literal may take their place (``self = 0`` before ``self.acc = Accuracy()`` is a
    stand-in; ``_unread_store`` offers the program without the receiver instead)."""
    out = set()
    for s in stmts:
        node = s.node
        if s.kind != "simple" or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
            continue
        assign = node.body[0]
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) and read_as_receiver(
            program, s.id, assign.targets[0].target.value
        ):
            out.add(id(assign.value))
    return out


def _split_tuple_assignment(program, s) -> str | None:
    """``x, y = a[:16], f(b)`` with ``y`` unread -> ``x = a[:16]`` and ``f(b)`` on its
    own line (a call may be the failing one, or have effects); None when every name is
    read, or when a value reads a name an earlier line of the split binds (``a, b = b, a``)."""
    node = s.node
    if s.kind != "simple" or len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
        return None
    assign = node.body[0]
    if len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))):
        return None
    pairs = _paired(target, value)
    if pairs is None:
        return None
    names = [n for n, _ in pairs]
    values = [v for _, v in pairs]
    read = [bool(program.deps.readers(s.id, n.value)) for n in names]
    # ``a = a`` is no assignment at all (``points, t = points, tensor(...)``).
    same = [isinstance(v, cst.Name) and v.value == n.value for n, v in zip(names, values)]
    if (all(read) and not any(same)
            and not (value.lpar or any(isinstance(el.value, (cst.Tuple, cst.List)) for el in value.elements))):
        return None  # ``x, y = a, b`` as two lines is no smaller; ``x, y = (a, b)`` is
    read = [r and not sm for r, sm in zip(read, same)]
    lines = []
    assigned: set[str] = set()
    for name, val, is_read in zip(names, values, read):
        if not is_read and not isinstance(val, cst.Call):
            continue
        if names_read(code_of(val)) & assigned:
            return None  # ``a, b = b, a``: the pair is evaluated before either is bound
        if is_read:
            lines.append(f"{name.value} = {code_of(val)}\n")
            assigned.add(name.value)
        else:
            lines.append(f"{code_of(val)}\n")
    return "".join(lines) or None


def _paired(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.Name, cst.BaseExpression]] | None:
    """``step, (x, y) = (0, (a, b))`` -> [(step, 0), (x, a), (y, b)]; None unless every
    name meets a value of its own."""
    if isinstance(target, cst.Name):
        return [(target, value)]
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))):
        return None
    if len(target.elements) != len(value.elements):
        return None
    if any(isinstance(el, cst.StarredElement) for el in (*target.elements, *value.elements)):
        return None
    out = []
    for t, v in zip(target.elements, value.elements):
        inner = _paired(t.value, v.value)
        if inner is None:
            return None
        out += inner
    return out


class SimplifyExpressions(EditPass):
    name = "simplify-expressions"
    needs_rebased = True

    def units(self, cand: Candidate, level: int) -> Sequence[Unit] | None:
        if level == 0 and self.waits(cand):
            return []
        program = cand.program
        protected = program.seeding
        chain = program.protected  # calls on the way to a seeding call
        edited = cand.expr_of
        modules = module_names(program)
        sizes = _integer_literals(program)
        units: list[Unit] = []
        deepest = 0
        counts = _identifier_counts(program)
        editable = cand.editable()
        receivers = _receiver_values(program, editable)
        for s in editable:
            if s.id in protected:
                continue  # ``torch.manual_seed(0)`` -> ``torch`` would unseed the program
            if level == 0:
                # ``label = random.randint(0, 1)`` with ``label`` unread -> the call alone:
                # its effects (a random draw) stay, the name goes; the same for a store
                # nothing reads back and for a call that cannot take its arguments.
                for lifted in (_unread_target(program, s), _unread_store(program, s, counts),
                               _uncallable(program, s)):
                    if lifted is not None:
                        units.append((Edit("replace", s.id, text=lifted),))
                split = _split_tuple_assignment(program, s)
                if split is not None:
                    units.append((Edit("replace", s.id, text=split),))
            for node, options in alternatives(s.node, sizes):
                # ``nn.Module()`` -> ``nn`` would hand a module object around as a value
                # (and ``model.layer = ...`` would then patch ``torch.nn``).
                options = [o for o in options if o[1] not in modules]
                if id(node) in receivers:
                    options = [o for o in options if not (o[0] == "expr" and _stands_in(o[1]))]
                if s.id in chain:
                    # Keep the calls that lead to the seeding: only keyword trimming.
                    options = [o for o in options if o[0] == "remove"]
                    if not options:
                        continue
                deepest = max(deepest, len(options))
                if level >= len(options):
                    continue
                idx = program.node_index(node)
                if idx in edited:
                    continue  # an earlier level already simplified it
                op, text = options[level]
                units.append((Edit(op, node=idx, text=text),))
        if level > 0 and level >= deepest:
            return None
        return units
