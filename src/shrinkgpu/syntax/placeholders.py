"""Stand-ins for objects: a receiver or an argument that a reduced program keeps only
because the failing call raises before anything uses it.

A constructor that raises inside a method (``self.acc = Accuracy()`` in an
``__init__``, a callback built in a trainer's argument list) fails before the object
around it is used, so a reduction may shrink that object to anything: ``self = 0`` in
front of the lifted line, ``Trainer(0, 0, ...)`` of a class emptied to ``pass``.  The
program still fails the same way, but a maintainer reads a receiver and arguments that
the failing call never touches, and has to delete them by hand.

What the program says without them is the failing call alone.  The passes offer that
instead, whichever of them lifted the statement: ``simplify-expressions`` turns a store
the program never reads back into its value and a call that cannot take its arguments
into the calls in them, and offers no literal for a name used as a receiver;
``inline-calls`` turns a constructor that never touches its instance into its body.
``shrinkgpu.readability`` counts what is left with the same rules (``in_text``), so
the rule a result is shrunk by and the one it is judged by cannot drift apart.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping

import libcst as cst

from shrinkgpu.syntax.code import code_of

__all__ = [
    "call_arguments_unused",
    "in_text",
    "instance_free_constructor",
    "is_stand_in",
    "literal_receivers",
    "read_as_receiver",
    "takes_arguments",
    "uses_instance",
]

# What a reduction writes for a value it found unneeded (``simplify-expressions``' ``rhs
# -> 0``), and what propagating such a binding writes where it was read.
_STAND_IN_NAMES = frozenset({"None", "True", "False"})

Resolve = Callable[[cst.Name], "cst.ClassDef | cst.FunctionDef | None"]


def is_stand_in(node: cst.BaseExpression) -> bool:
    """Whether ``node`` is a literal no object is: a number, ``None``, a flag."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float)) or (isinstance(node, cst.Name) and node.value in _STAND_IN_NAMES)


def _parameters(fn: cst.FunctionDef) -> list[cst.Param]:
    return list(fn.params.posonly_params) + list(fn.params.params)


def uses_instance(fn: cst.FunctionDef) -> bool:
    """Whether a method's body names its first parameter (the instance) or ``super``
    (which finds the instance by itself)."""
    params = _parameters(fn)
    wanted = {"super"} | ({params[0].name.value} if params else set())
    found = False

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or node.value in wanted

    fn.body.visit(Names())
    return found


def _binds(call: cst.Call, fn: cst.FunctionDef, skip_first: bool) -> bool | None:
    """Whether Python can bind ``call``'s arguments to ``fn``'s parameters (the first one
    already bound when ``skip_first``); None when the call spreads ``*``/``**``."""
    if any(a.star for a in call.args):
        return None
    params = fn.params
    positional = _parameters(fn)[1 if skip_first else 0:]
    if skip_first and not _parameters(fn):
        return False if not isinstance(params.star_arg, cst.Param) else None
    varargs = isinstance(params.star_arg, cst.Param)
    varkw = params.star_kwarg is not None
    given = [a for a in call.args if a.keyword is None]
    if len(given) > len(positional) and not varargs:
        return False
    bound = {p.name.value for p in positional[:len(given)]}
    named = {p.name.value for p in list(params.params) + list(params.kwonly_params)}
    for arg in call.args:
        if arg.keyword is None:
            continue
        key = arg.keyword.value
        if key in bound or (key not in named and not varkw):
            return False
        bound.add(key)
    required = [p for p in positional + list(params.kwonly_params) if p.default is None]
    return all(p.name.value in bound for p in required)


def _constructor(cls: cst.ClassDef, resolve: Resolve, depth: int = 0) -> cst.FunctionDef | str | None:
    """The ``__init__`` a call of ``cls`` runs, ``"object"`` when none of its classes
    defines one (the call takes no arguments), None when that is not known from the
    source (a decorator or a metaclass makes the class, a base is not a local class, a
    ``__new__`` takes the arguments)."""
    if cls.decorators or cls.keywords or depth > 16:
        return None
    for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in ("__new__", "__call__"):
            return None
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            return None if stmt.decorators else stmt
        if isinstance(stmt, cst.SimpleStatementLine) and ("__init__" in code_of(stmt) or "__new__" in code_of(stmt)):
            return None  # ``__init__ = other``: bound some other way
    for base in cls.bases:
        if base.keyword is not None or base.star:
            return None
        if isinstance(base.value, cst.Name) and base.value.value == "object":
            continue
        definition = resolve(base.value) if isinstance(base.value, cst.Name) else None
        if not isinstance(definition, cst.ClassDef):
            return None
        found = _constructor(definition, resolve, depth + 1)
        if found != "object":
            return found
    return "object"


def takes_arguments(call: cst.Call, definition: cst.CSTNode, resolve: Resolve) -> bool | None:
    """Whether a call of a local function or class by its name can bind its arguments:
    False when it cannot (it raises ``TypeError`` before running a line of the callee),
    None when that is not known from the source."""
    if isinstance(definition, cst.FunctionDef):
        return None if definition.decorators else _binds(call, definition, skip_first=False)
    if not isinstance(definition, cst.ClassDef):
        return None
    init = _constructor(definition, resolve)
    if init is None:
        return None
    if isinstance(init, str):  # "object": none of its classes defines __init__
        return not call.args
    return _binds(call, init, skip_first=True)


def call_arguments_unused(call: cst.Call, definition: cst.CSTNode, resolve: Resolve) -> bool:
    """Whether ``call``'s arguments are there only to be evaluated: the call cannot take
    them (``Trainer(0, 0, loss, callbacks=[...])`` of a ``class Trainer: pass``), so a
    program that gets past it fails there, and one that fails as the original did fails
    in an argument."""
    return bool(call.args) and takes_arguments(call, definition, resolve) is False


def read_as_receiver(program, sid: int, name: str) -> bool:
    """Whether a statement reads ``name``, as statement ``sid`` binds it, as an object
    (``name.attr``, stored or loaded): then no literal can stand for the value, however
    the program fails."""
    deps = program.deps
    return any(deps.attribute_around(node) is not None for node in deps.reads(sid, name))


class _Scopes(cst.CSTVisitor):
    """Per scope (the module, each function): the names bound once, by a plain ``name =
    literal`` line, to a stand-in literal, and the names used as ``name.attr``.  A name
    bound again (``best = None``, later ``best = model``) may be an object by then."""

    def __init__(self):
        self.stack: list[tuple[dict[str, str], dict[str, int], set[str]]] = [({}, {}, set())]
        self.found: list[str] = []

    def _bind(self, target: cst.CSTNode) -> None:
        for node in _names_in(target):
            counts = self.stack[-1][1]
            counts[node] = counts.get(node, 0) + 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(({}, {}, set()))
        for param in _parameters(node) + list(node.params.kwonly_params):
            self._bind(param.name)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.close()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and is_stand_in(node.value):
            name = node.targets[0].target.value
            self.stack[-1][0].setdefault(name, f"{name} = {code_of(node.value).strip()}")

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.stack[-1][2].add(node.value.value)

    def close(self) -> None:
        bound, counts, receivers = self.stack.pop()
        self.found += [line for name, line in bound.items() if name in receivers and counts.get(name) == 1]


def _names_in(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names_in(el.value)]
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    return []


_PLAIN = (cst.Name, cst.Integer, cst.Float, cst.SimpleString)


def instance_free_constructor(
    cls: cst.ClassDef, methods: Mapping[str, cst.FunctionDef], call: cst.Call
) -> cst.FunctionDef | None:
    """The method a call of ``cls`` runs of the user's code, when it never touches the
    instance (so no object need stand in for it): the class's own ``__init__``; or a
    ``@dataclass``'s ``__post_init__`` taking nothing but the instance, when the call's
    arguments are names and literals (the fields they set are the instance's, which the
    body does not read).  None otherwise, and where a ``__new__`` or a metaclass runs
    first.  ``methods``: the class's methods by name."""
    if cls.keywords or "__new__" in methods:
        return None
    decorators = [code_of(d.decorator).split("(")[0] for d in cls.decorators]
    if not decorators and "__init__" in methods:
        fn = methods["__init__"]
        return None if fn.decorators or uses_instance(fn) else fn
    post_init = methods.get("__post_init__")
    if (
        decorators in (["dataclass"], ["dataclasses.dataclass"]) and "__init__" not in methods and post_init is not None
        and not post_init.decorators and len(_parameters(post_init)) == 1 and not uses_instance(post_init)
        and all(not a.star and isinstance(a.value, _PLAIN) for a in call.args)
    ):
        return post_init
    return None


def literal_receivers(module: cst.Module) -> list[str]:
    """``self = 0`` for each name a scope binds to a literal (a number, ``None``, a flag)
    and also uses as an object (``self.acc = ...``, ``x.shape``), as ``name = literal``."""
    visitor = _Scopes()
    module.visit(visitor)
    visitor.close()
    return visitor.found


def _top_level(module: cst.Module) -> dict[str, cst.CSTNode | None]:
    """Each name the module's top level binds by ``def`` or ``class``; None for a name it
    binds more than once (which one a call reaches is not known)."""
    out: dict[str, cst.CSTNode | None] = {}
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            name = stmt.name.value
            out[name] = None if name in out else stmt
    return out


def _calls(module: cst.Module) -> Iterator[cst.Call]:
    found: list[cst.Call] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    module.visit(Calls())
    return iter(found)


def in_text(text: str) -> list[str]:
    """The stand-ins of a program's text: ``self = 0`` for a receiver bound to a literal,
    and each call of one of its own classes or functions that cannot take the arguments
    it is given (``Trainer(0, 0, nn.CrossEntropyLoss(), callbacks=[...])`` of a
    ``class Trainer: pass``), as written; none for a text that does not parse."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return []
    defined = _top_level(module)

    def resolve(name: cst.Name):
        return defined.get(name.value)

    out = literal_receivers(module)
    for call in _calls(module):
        definition = resolve(call.func) if isinstance(call.func, cst.Name) else None
        if definition is not None and call_arguments_unused(call, definition, resolve):
            out.append(ast.unparse(ast.parse(code_of(call).strip(), mode="eval")))
    return out
