"""``torch.compile(model)`` of a local module replaced by ``torch.compile`` of its forward.

A maintainer's cut of a compile failure is a function under ``torch.compile``; a user's
script compiles a module (``step = torch.compile(model, fullgraph=True)``) whose class
carries ``__init__``, the submodules and the training-time methods.  Dynamo traces a
module's ``forward`` the same way it traces a function that reads the module, so this pass
writes ``forward`` as a function of its inputs beside the compile call, with ``self`` bound
to the instance, and compiles that::

    def forward(x):
        h = model.inp(x)
        ...
    step = torch.compile(forward, fullgraph=True)

The class then loses its last caller of ``forward`` and the other passes can take it
apart (its ``__init__`` becomes plain bindings, unused submodules go).  A candidate that
still needs the compiled object to be a module (``step.parameters()`` before the failure)
fails differently and the unit is not taken.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit, names_read
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.queries import (
    Substitute,
    bound_names,
    first_param,
    free_names,
    instance_class,
    method_of,
    param_names,
    variable_names,
)

_COMPILE = ("torch.compile",)


class _CompileCalls(cst.CSTVisitor):
    """``torch.compile(NAME, ...)`` calls in a statement, outermost first."""

    def __init__(self):
        self.calls: list[cst.Call] = []

    def visit_Lambda(self, node) -> bool:
        return False  # a compile call inside a lambda runs later, if ever

    def visit_Call(self, node: cst.Call) -> None:
        # ``torch.compile(model)`` or ``torch.compile(Net(cfg))``
        if code_of(node.func) in _COMPILE and node.args and isinstance(node.args[0].value, (cst.Name, cst.Call)):
            if node.args[0].keyword is None and not node.args[0].star:
                self.calls.append(node)


class _SelfUse(cst.CSTVisitor):
    """Whether a method body uses ``super()`` (bound to the class, not to an instance) or
    assigns attributes of ``self`` (the instance still exists, but a maintainer's function
    would not write its state; kept out to stay a plain rewrite)."""

    def __init__(self, self_name: str):
        self.self_name = self_name
        self.blocked = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "super":
            self.blocked = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self._on_self(node.target):
            self.blocked = True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._on_self(node.target):
            self.blocked = True

    def _on_self(self, target: cst.BaseExpression) -> bool:
        return isinstance(target, cst.Attribute) and code_of(target.value) == self.self_name


def _fresh(wanted: str, taken: set[str]) -> str:
    if wanted not in taken:
        return wanted
    i = 2
    while f"{wanted}{i}" in taken:
        i += 1
    return f"{wanted}{i}"


class _ReplaceArg(cst.CSTTransformer):
    def __init__(self, call: cst.Call, name: str):
        self.call, self.name = call, name

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        if original_node is not self.call:
            return updated_node
        first = updated_node.args[0].with_changes(value=cst.Name(self.name))
        return updated_node.with_changes(args=[first, *updated_node.args[1:]])


class CompiledForward(LevelZeroPass):
    name = "compiled-forward"
    needs_rebased = True

    def edits(self, cand: Candidate) -> list[Unit]:
        out: list[Unit] = []
        for s in cand.editable():
            if s.kind != "simple":
                continue
            found = _CompileCalls()
            s.node.visit(found)
            for call in found.calls:
                rewritten = self._rewrite(cand, s, call)
                if rewritten is not None:
                    text, method_sid = rewritten
                    # The method goes in the same unit: the search takes only smaller
                    # programs, and nothing else calls it once the module is not called.
                    out.append((Edit("replace", s.id, text=text), Edit("delete", method_sid)))
                    break
        return out

    def _rewrite(self, cand: Candidate, s, call: cst.Call) -> tuple[str, int] | None:
        program = cand.program
        instance = call.args[0].value
        constructed = isinstance(instance, cst.Call)  # ``torch.compile(Net(cfg))``
        binders = program.deps.binders(instance.func if constructed else instance)
        if len(binders) != 1:
            return None
        (binder,) = binders
        if constructed:
            cls_sid = binder if program.stmts[binder].kind == "class" and binder in cand.live else None
            if not isinstance(instance.func, cst.Name):
                return None
        else:
            cls_sid = instance_class(cand, binder)
        if cls_sid is None:
            return None
        method = method_of(cand, cls_sid, "forward")
        if method is None:
            return None
        method_sid, fn = method
        self_name = first_param(fn)
        if self_name is None or fn.decorators or fn.asynchronous is not None:
            return None
        if not isinstance(fn.body, cst.IndentedBlock):
            return None
        uses = _SelfUse(self_name)
        fn.body.visit(uses)
        if uses.blocked:
            return None
        if self._shadowed(program, s.id, fn):
            return None
        # Names the pasted lines could clash with: what the module and the functions
        # around the call bind (a method's name binds nothing there), and what forward reads.
        taken = bound_names(program.modules[s.file]) | names_read(code_of(fn.body)) | variable_names(fn.params)
        cur = program.stmts[s.id].parent
        while cur is not None:
            node = program.stmts[cur].node
            if isinstance(node, cst.FunctionDef):
                taken |= bound_names(node.body) | variable_names(node.params)
            cur = program.stmts[cur].parent
        # ``model = torch.compile(model)``: the function must not read the name that the
        # same line rebinds to the compiled function (it would call itself).
        rebinds = not constructed and instance.value in variable_names(s.node.body[0].targets[0].target) if (
            len(s.node.body) == 1 and isinstance(s.node.body[0], cst.Assign) and len(s.node.body[0].targets) == 1
        ) else False
        lines: list[str] = []
        if constructed or rebinds:
            # the instance under a name of its own, made where the compile call made it
            holder = _fresh("module", taken)
            taken.add(holder)
            lines.append(f"{holder} = {code_of(instance)}")
        else:
            holder = instance.value
        name = _fresh("forward", taken)
        body = fn.body.visit(Substitute({self_name: holder}))
        params = fn.params
        positional = list(params.posonly_params) + list(params.params)
        if params.posonly_params:
            params = params.with_changes(posonly_params=positional[1:], posonly_ind=cst.MaybeSentinel.DEFAULT) if len(
                positional
            ) > 1 else params.with_changes(posonly_params=[], posonly_ind=cst.MaybeSentinel.DEFAULT)
        else:
            params = params.with_changes(params=list(params.params)[1:])
        func = cst.FunctionDef(name=cst.Name(name), params=params, body=body)
        lines.append(cst.Module(body=[func]).code.rstrip("\n"))
        lines.append(code_of(s.node.visit(_ReplaceArg(call, name))).strip("\n"))
        return "\n".join(lines) + "\n", method_sid

    @staticmethod
    def _shadowed(program, sid: int, fn: cst.FunctionDef) -> bool:
        """Whether a function the compile call sits in binds a name that ``forward``
        reads from the module (``F``, a config): pasted there, it would read the local."""
        free = free_names(fn, keywords=False)
        cur = program.stmts[sid].parent
        while cur is not None:
            node = program.stmts[cur].node
            if isinstance(node, cst.FunctionDef) and free & (bound_names(node.body) | param_names(node)):
                return True
            cur = program.stmts[cur].parent
        return False
