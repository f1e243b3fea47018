"""Questions passes ask of a program, in one public place.

What several passes need (the names bound to modules, a statement's own parts, the class
of an instance, a method of it, parameter substitution) lives here, so that a pass is
one file that imports public names only.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.syntax.program import Candidate
from shrinkgpu.syntax.program import code_of as _code

__all__ = ["Substitute", "assigned_names", "first_param", "header_parts", "instance_class", "method_of", "module_names"]


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
                            out.add(_code(bound).split(".")[0])
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
            if any(_code(d.decorator) in ("staticmethod", "classmethod", "property") for d in node.decorators):
                return None
            return child, node
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
        from shrinkgpu.syntax.program import parse_expression

        return parse_expression(text)



def assigned_names(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in assigned_names(el.value)]
    return []
