"""Parameters nothing reads, with the arguments that fill them.

Code grows parameters it no longer uses (``seed``, ``split="train"``, ``dropout=0.2``,
``callbacks=None``), and every call site keeps passing them: ``cfg.horizon`` at the
call keeps a config field alive, and ``SyntheticKWS(32, seed=1)`` reads as if the seed
mattered.  A unit removes one parameter that the function's body never names, together
with the argument each call in the program passes for it (by keyword, or at its
position).

Which calls are the function's: ``f(...)`` for a function ``f``; ``x.m(...)`` for a
method ``m`` (a bound call: the first parameter is implicit, except for a
``@staticmethod``); ``C(...)`` for ``C.__init__``.  A parameter without a default is
only offered when every use of the name is such a call, so a function that a library
calls (a hook, a ``collate_fn``, ``forward`` through ``__call__``) keeps its positional
parameters; one with a default can always go.  Dunder methods other than ``__init__``,
names defined twice, classes with subclasses, and calls that spread ``*args`` or
``**kwargs`` are left alone; so is what the library cut replays (``cut-library`` calls
``Net()._step(*saved_args)`` with as many arguments as the original run passed), unless
none of its parameters is read any more: then they all go at once, with the saved
arguments.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import variable_names


class _Uses(cst.CSTVisitor):
    """Every call of, and every other mention of, each name in ``names`` (as ``name`` or
    ``<expr>.name``)."""

    def __init__(self, names: set[str]):
        self.names = names
        self.calls: dict[str, list[cst.Call]] = {}
        self.other: set[str] = set()
        self._callee: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = _callee_name(node.func)
        if name in self.names:
            self.calls.setdefault(name, []).append(node)
            self._callee.add(id(node.func))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and id(node) not in self._callee:
            self.other.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value in self.names and id(node) not in self._callee:
            self.other.add(node.attr.value)
        node.value.visit(self)
        return False  # ``.attr`` is no read of a variable ``attr``

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        # The definition's own name is no use; its parameters, defaults and body are.
        for part in (node.params, node.body, *node.decorators):
            part.visit(self)
        if node.returns is not None:
            node.returns.visit(self)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        for part in (node.body, *node.bases, *node.keywords, *node.decorators):
            part.visit(self)
        return False


def _callee_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


class _Calls(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = _callee_name(node.func)
        if name:
            self.names.add(name)


def _called_names(code: str) -> set[str]:
    """The names of what ``code`` calls (``Net()._step(*saved)`` -> ``Net``, ``_step``)."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return set()
    calls = _Calls()
    module.visit(calls)
    return calls.names


def _decorator_names(fn: cst.FunctionDef) -> set[str]:
    return {code_of(d.decorator).split("(")[0].split(".")[-1] for d in fn.decorators}


class DropParameters(LevelZeroPass):
    """``def f(x, seed=0)`` with ``seed`` unread -> ``def f(x)``; ``f(a, seed=1)`` -> ``f(a)``."""

    name = "drop-parameters"
    needs_rebased = True  # call sites are found in the original trees

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        stmts = program.stmts
        # What each function is called by: the function's name, the class's for ``__init__``.
        targets: list[tuple[str, cst.FunctionDef, int]] = []  # (callee name, def, implicit leading args)
        defined: dict[str, int] = {}  # functions and classes by name
        subclassed: set[str] = set()
        for s in cand.editable():
            node = s.node
            if isinstance(node, cst.ClassDef):
                for base in node.bases:
                    subclassed.add(code_of(base.value).split(".")[-1].split("[")[0])
            if not isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                continue
            name = node.name.value
            if name != "__init__":
                defined[name] = defined.get(name, 0) + 1
            if isinstance(node, cst.ClassDef):
                continue
            owner = stmts[s.parent].node if s.parent is not None else None
            decorators = _decorator_names(node)
            if isinstance(owner, cst.ClassDef):
                if name == "__init__":
                    name = owner.name.value
                elif name.startswith("__") and name.endswith("__"):
                    continue
                if decorators - {"staticmethod", "classmethod"}:
                    continue
                skip = 0 if "staticmethod" in decorators else 1
            elif s.parent is not None and not isinstance(owner, cst.FunctionDef):
                continue  # a def under ``if``/``try``: maybe defined twice
            else:
                if decorators:
                    continue
                skip = 0
            targets.append((name, node, skip))
        if not targets:
            return []
        # The call the library cut replays passes the arguments the original run saved,
        # as many as the function took then: its signature is that file's contract.
        cut = program.facts.cut
        replayed = _called_names(cut.replacement) if cut is not None else set()
        is_replayed = [t[0] in replayed or t[1].name.value in replayed for t in targets]
        uses = _Uses({t[0] for t in targets})
        for path, module in program.modules.items():
            if path not in cand.dropped_files:
                module.visit(uses)

        out: list[Unit] = []
        for (name, fn, skip), replay in zip(targets, is_replayed):
            if replay and defined.get(name, 0) == 1:
                out.extend(self._replayed_unit(program, fn, skip, uses.calls.get(name, [])))
        targets = [t for t, replay in zip(targets, is_replayed) if not replay]
        for name, fn, skip in targets:
            if defined.get(name, 0) > 1:
                continue  # two functions or classes of that name: whose call is whose?
            if name != fn.name.value and name in subclassed:
                continue  # a subclass inherits this ``__init__`` and is called with its arguments
            calls = uses.calls.get(name, [])
            if any(a.star for c in calls for a in c.args):
                continue
            if len(fn.params.params) < skip or fn.params.posonly_params:
                continue  # (``def f(a, /, b)``: positions would need counting across the ``/``)
            positional = list(fn.params.params)[skip:]
            body_names = variable_names(fn.body, keywords=False)
            only_called = name not in uses.other and bool(calls)
            for index, param in enumerate(positional):
                out.extend(self._unit(program, param, index, calls, body_names, only_called))
            if len(fn.params.kwonly_params) > 1 or not isinstance(fn.params.star_arg, cst.ParamStar):
                # (the only keyword-only parameter after a bare ``*`` cannot go alone)
                for param in fn.params.kwonly_params:
                    out.extend(self._unit(program, param, None, calls, body_names, only_called))
        return out

    def _replayed_unit(self, program, fn: cst.FunctionDef, skip: int, calls) -> list[Unit]:
        """``def collate(batch)`` with ``batch`` unread, which the library cut calls with
        the saved arguments (``collate(*_call['args'], **_call['kwargs'])``) -> ``def
        collate()`` and ``collate()``: every parameter and every argument at once (the
        saved call's arguments fill the signature as a whole, not one by one), so the
        file of saved arguments can go.  Only when each call spreads what it passes."""
        params = fn.params
        if params.posonly_params or params.star_kwarg is not None or isinstance(params.star_arg, cst.Param):
            return []
        own = [*list(params.params)[skip:], *params.kwonly_params]
        body_names = variable_names(fn.body, keywords=False)
        if not own or any(p.name.value in body_names for p in own) or len(params.params) < skip:
            return []
        if not calls or not all(any(a.star for a in c.args) for c in calls):
            return []
        edits = [Edit("remove", node=program.node_index(p)) for p in own]
        if isinstance(params.star_arg, cst.ParamStar):
            edits.append(Edit("remove", node=program.node_index(params.star_arg)))
        edits += [Edit("remove", node=program.node_index(a)) for c in calls for a in c.args]
        return [tuple(edits)]

    def _unit(self, program, param: cst.Param, index: int | None, calls, body_names, only_called) -> list[Unit]:
        pname = param.name.value
        if pname in body_names:
            return []
        if param.default is None and not only_called:
            return []
        edits = [Edit("remove", node=program.node_index(param))]
        for call in calls:
            positional = [a for a in call.args if a.keyword is None]
            keyword = [a for a in call.args if a.keyword is not None and a.keyword.value == pname]
            if keyword:
                edits.append(Edit("remove", node=program.node_index(keyword[0])))
            elif index is not None and index < len(positional):
                edits.append(Edit("remove", node=program.node_index(positional[index])))
            elif param.default is None:
                return []  # a call that does not pass it would fail already: not ours
        return [tuple(edits)]
