"""A module class made once becomes its parts: ``__init__``'s bindings and ``forward`` as a
plain function.

A maintainer's cut has no ``class Block(nn.Module)`` around the three lines that fail:
the layers it needs are locals and the computation is a function (a ``torch.compile``
failure is a compiled function, a shape error a call on a tensor).  For ``model =
Net(cfg)`` of a local ``nn.Module`` class that has nothing left but ``__init__`` and
``forward``, this pass writes, where the instance was made::

    cfg = <the argument>          # __init__'s parameters, bound as the call binds them
    fc = nn.Linear(cfg.d, cfg.d)  # __init__'s body, ``self.fc`` read as ``fc``
    def forward(x):
        return fc(x).relu()       # forward's body, ``self.fc`` read as ``fc``
    model = forward

and deletes the class.  ``model(x)`` and ``torch.compile(model)`` then call the function;
a candidate that still needs the instance (``model.parameters()`` before the failure)
fails another way and the unit is not taken.  Names that would clash with the names
around the instance are prefixed with the instance's name (``model_cfg``).
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.passes.inline import match_arguments
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import Substitute, bound_names, first_param, free_names, variable_names

_BASES = ("nn.Module", "torch.nn.Module", "Module")


class _SelfToNames(cst.CSTTransformer):
    """``self.x`` -> ``names[x]`` (as a target or a read); anything else done with
    ``self`` (passed on, ``self.x`` of an attribute it never set, ``super()``) makes the
    rewrite impossible."""

    def __init__(self, self_name: str, names: dict[str, str]):
        self.self_name, self.names = self_name, names
        self.blocked = False

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        if isinstance(original_node.value, cst.Name) and original_node.value.value == self.self_name:
            name = self.names.get(original_node.attr.value)
            if name is None:
                self.blocked = True
                return updated_node
            return cst.Name(name)
        return updated_node

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name):
        return updated_node

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if isinstance(node.value, cst.Name) and node.value.value == self.self_name:
            return False  # handled whole in leave_Attribute
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.self_name:
            self.blocked = True  # bare ``self``

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "super":
            self.blocked = True


def _attributes_set(body: cst.BaseSuite, self_name: str) -> list[str]:
    found: list[str] = []

    class Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self._add(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._add(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._add(node.target)

        def _add(self, target) -> None:
            targets = [el.value for el in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
            for t in targets:
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == self_name:
                    if t.attr.value not in found:
                        found.append(t.attr.value)

        def visit_FunctionDef(self, node) -> bool:
            return False

    body.visit(Targets())
    return found


def _is_super_init(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and code_of(stmt.body[0].value).replace(" ", "") in ("super().__init__()",))


class FlattenModule(LevelZeroPass):
    name = "flatten-module"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        editable = {s.id: s for s in cand.editable()}
        out: list[Unit] = []
        for s in editable.values():
            if s.kind != "class":
                continue
            readers = [r for r in program.deps.readers(s.id, s.node.name.value) if r in cand.live]
            # made once (each instance has weights of its own), on a line of its own
            if len(readers) != 1 or readers[0] not in editable or editable[readers[0]].kind != "simple":
                continue
            site = readers[0]
            calls = _Made(s.node.name.value)
            program.stmts[site].node.visit(calls)
            if len(calls.found) != 1:
                continue
            text = self._rewrite(cand, s.id, site, calls.found[0])
            if text is not None:
                out.append((Edit("replace", site, text=text), Edit("delete", s.id)))
        return out

    def _rewrite(self, cand: Candidate, cls_sid: int, site: int, made: cst.Call) -> str | None:
        program = cand.program
        cls = program.stmts[cls_sid].node
        if cls.decorators or cls.keywords or len(cls.bases) != 1:
            return None
        methods = _methods(cand, cls_sid)
        if methods is None:
            return None
        if code_of(cls.bases[0].value) not in _BASES:
            # ``class Model(PreTrainedModel)`` whose base is a local module class with
            # nothing but an ``__init__``: the subclass runs that one
            base = _local_base(cand, cls.bases[0].value)
            if base is None or "__init__" in methods:
                return None
            methods = {**base, **methods}
        if set(methods) - {"__init__"} != {"forward"}:
            return None
        forward, init = methods["forward"], methods.get("__init__")
        stmt = program.stmts[site].node
        small = stmt.body[0]
        # ``model = Net(cfg)``: ``model`` names the function; ``torch.compile(Net(cfg))``:
        # the function takes the instance's place in the line
        whole = (isinstance(small, cst.Assign) and len(small.targets) == 1 and small.value is made
                 and isinstance(small.targets[0].target, cst.Name))
        target = small.targets[0].target.value if whole else cls.name.value.lower()
        # The names around the instance: the file, less the class (a method's name and
        # its locals bind nothing outside it), and the line that made it.
        module = program.modules[program.stmts[site].file]
        outer = site
        while program.stmts[outer].parent is not None:
            outer = program.stmts[outer].parent
        taken = set()
        for top in module.body:
            if top is cls:
                continue
            # a function or class the instance is not made in: what it reads from the
            # module (its own locals are its own)
            taken |= variable_names(top) if top is program.stmts[outer].node else _reads_from_outside(top)
        taken.add(target)
        bindings: list[str] = []
        rename: dict[str, str] = {}

        def fresh(name: str) -> str:
            new = name if name not in taken else f"{target}_{name}"
            while new in taken:
                new += "_"
            taken.add(new)
            return new

        if init is not None:
            self_name = first_param(init)
            if self_name is None or not isinstance(init.body, cst.IndentedBlock):
                return None
            params = init.params
            if params.star_kwarg is not None or isinstance(params.star_arg, cst.Param):
                return None
            values = match_arguments(list(params.params)[1:], list(params.kwonly_params), made)
            if values is None:
                return None
            body = list(init.body.body)
            if body and _is_super_init(body[0]):
                body = body[1:]
            locals_ = set(values) | bound_names(cst.IndentedBlock(body=body))
            for name in sorted(locals_):
                rename[name] = fresh(name)
            bindings = [f"{rename[n]} = {v}" for n, v in values.items()]
            attrs = _attributes_set(init.body, self_name)
        else:
            self_name, body, attrs = first_param(forward), [], []
            if made.args:
                return None
        fwd_self = first_param(forward)
        if fwd_self is None or not isinstance(forward.body, cst.IndentedBlock):
            return None
        fwd_names = variable_names(forward) - {fwd_self}
        names: dict[str, str] = {}
        for attr in attrs:
            # ``self.cfg = cfg``: the attribute is the parameter's value under its name
            names[attr] = rename[attr] if attr in rename and _plain_copy(body, self_name, attr) else fresh(attr)
        if set(names.values()) & fwd_names:
            return None  # forward's own names would hide a part
        pasted: list[str] = list(bindings)
        if body:
            renamed = cst.IndentedBlock(body=body).visit(Substitute(rename))
            parts = _SelfToNames(self_name, names)
            renamed = renamed.visit(parts)
            if parts.blocked:
                return None
            pasted += [code_of(s).strip("\n") for s in renamed.body
                       if not _is_copy_of_itself(s)]
        parts = _SelfToNames(fwd_self, names)
        fwd_body = forward.body.visit(parts)
        if parts.blocked:
            return None
        name = fresh("forward") if "forward" in taken else "forward"
        taken.add(name)
        params = forward.params.with_changes(params=list(forward.params.params)[1:])
        func = cst.FunctionDef(name=cst.Name(name), params=params, body=fwd_body)
        pasted.append(cst.Module(body=[func]).code.strip("\n"))
        if whole:
            pasted.append(f"{target} = {name}")
        else:
            pasted.append(code_of(stmt.visit(_Replace(made, cst.Name(name)))).strip("\n"))
        return "\n".join(pasted) + "\n"


def _reads_from_outside(node: cst.CSTNode) -> set[str]:
    """The names a top-level statement binds or reads in the module's scope: for a
    function or a class, not the locals of its functions."""
    if isinstance(node, cst.FunctionDef):
        return {node.name.value} | free_names(node) | set().union(*(variable_names(d) for d in node.decorators))
    if isinstance(node, cst.ClassDef):
        out = {node.name.value}
        for part in [*node.bases, *node.keywords, *node.decorators]:
            out |= variable_names(part)
        for stmt in node.body.body:
            out |= _reads_from_outside(stmt) - ({stmt.name.value} if isinstance(stmt, cst.FunctionDef) else set())
        return out
    return variable_names(node)


def _methods(cand: Candidate, cls_sid: int) -> dict[str, cst.FunctionDef] | None:
    """A class's methods by name; None when its body holds anything else (class
    attributes, properties, decorated or async methods): not a plain module."""
    program = cand.program
    methods: dict[str, cst.FunctionDef] = {}
    for child in program.children.get(cls_sid, ()):
        if child not in cand.live:
            continue
        node = program.stmts[child].node
        if not isinstance(node, cst.FunctionDef) or node.decorators or node.asynchronous is not None:
            return None
        methods[node.name.value] = node
    return methods


def _local_base(cand: Candidate, base: cst.BaseExpression) -> dict[str, cst.FunctionDef] | None:
    """The methods of a local ``nn.Module`` class named as a base, when it has at most an
    ``__init__``."""
    if not isinstance(base, cst.Name):
        return None
    program = cand.program
    binders = program.deps.binders(base)
    if len(binders) != 1:
        return None
    (sid,) = binders
    node = program.stmts[sid].node
    if program.stmts[sid].kind != "class" or sid not in cand.live or node.decorators or node.keywords:
        return None
    if len(node.bases) != 1 or code_of(node.bases[0].value) not in _BASES:
        return None
    methods = _methods(cand, sid)
    return methods if methods is not None and set(methods) <= {"__init__"} else None


class _Made(cst.CSTVisitor):
    """The calls of a class in a line (``Net(cfg)``), not inside a lambda or a
    comprehension's element: one that runs once when the line does."""

    def __init__(self, name: str):
        self.name = name
        self.found: list[cst.Call] = []

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_ListComp(self, node) -> bool:
        node.for_in.iter.visit(self)  # a comprehension's element makes one per item
        return False

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == self.name:
            self.found.append(node)


class _Replace(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode):
        self.old, self.new = old, new

    def on_leave(self, original_node, updated_node):
        return self.new if original_node is self.old else updated_node


def _plain_copy(body: list[cst.BaseStatement], self_name: str, attr: str) -> bool:
    """Whether ``self.attr`` is only ever set by ``self.attr = attr``."""
    sets = [s for s in body if isinstance(s, cst.SimpleStatementLine) and f"{self_name}.{attr}" in code_of(s)]
    return all(code_of(s).strip().replace(" ", "") == f"{self_name}.{attr}={attr}" for s in sets)


def _is_copy_of_itself(stmt: cst.BaseStatement) -> bool:
    """``cfg = cfg``, left by ``self.cfg = cfg``: it says nothing."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return False
    a = stmt.body[0]
    return len(a.targets) == 1 and code_of(a.targets[0].target) == code_of(a.value)
