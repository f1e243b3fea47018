"""The compile settings of a torch.compile failure, one at a time, on the minimal case.

The changes here are the ones a torch.compile failure calls for (the pt2 bug template's
ablation): the backend (``eager`` runs Dynamo alone, ``aot_eager`` adds AOT autograd,
``inductor`` compiles), ``fullgraph=False``, ``dynamic`` on and off, and compilation off
altogether.  Each change is a new text of the program, run in a fresh interpreter by the
caller; its outcome is *same bug*, *passes*, or *fails differently* with that first error.
Changes are made on the program's syntax (libcst), so a ``torch.compile(...)`` anywhere,
as a decorator or under ``functools.partial``, gets the same keyword.
"""

from __future__ import annotations

from typing import Callable, Mapping

import libcst as cst

from shrinkgpu.ablation.changes import BACKEND, Change, Outcome, diff_of
from shrinkgpu.syntax.code import code_of

__all__ = ["BACKENDS", "compile_backend", "compile_changes", "summary"]

BACKENDS = {
    "eager": "Dynamo alone: its tracing, no AOT autograd, no compiler",
    "aot_eager": "Dynamo and AOT autograd, no compiler",
    "inductor": "Dynamo, AOT autograd and Inductor (the default)",
}
_COMPILE = "torch.compile"


def _is_compile(call: cst.Call) -> bool:
    if code_of(call.func) == _COMPILE:
        return True
    # ``functools.partial(torch.compile, backend=...)``: the keywords go to torch.compile
    return bool(call.args) and code_of(call.args[0].value) == _COMPILE and call.args[0].keyword is None


class _Compiles(cst.CSTVisitor):
    def __init__(self):
        self.keywords: list[dict[str, str]] = []
        self.bare_decorators = 0
        self.partials = 0

    def visit_Call(self, node: cst.Call) -> None:
        if _is_compile(node):
            self.keywords.append({a.keyword.value: code_of(a.value) for a in node.args if a.keyword is not None})
            if code_of(node.func) != _COMPILE:
                self.partials += 1

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if code_of(node.decorator) == _COMPILE:
            self.bare_decorators += 1
            self.keywords.append({})


class _SetKeyword(cst.CSTTransformer):
    """Every torch.compile call gets ``name=value`` (replacing the one it had)."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def _arg(self) -> cst.Arg:
        return cst.Arg(keyword=cst.Name(self.name), value=cst.parse_expression(self.value),
                       equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                             whitespace_after=cst.SimpleWhitespace("")))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        if not _is_compile(original_node):
            return updated_node
        args = [a for a in updated_node.args if not (a.keyword is not None and a.keyword.value == self.name)]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated_node.with_changes(args=[*args, self._arg()])

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator):
        if code_of(original_node.decorator) != _COMPILE:
            return updated_node
        return updated_node.with_changes(decorator=cst.Call(func=updated_node.decorator, args=[self._arg()]))


class _Uncompile(cst.CSTTransformer):
    """``torch.compile(f, ...)`` -> ``f``; ``@torch.compile(...)`` removed."""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        if code_of(original_node.func) == _COMPILE and updated_node.args and updated_node.args[0].keyword is None:
            return updated_node.args[0].value
        return updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef):
        kept = [d for d in updated_node.decorators if not _decorates_compile(d)]
        return updated_node.with_changes(decorators=kept)

    leave_ClassDef = leave_FunctionDef


def _decorates_compile(d: cst.Decorator) -> bool:
    node = d.decorator
    return code_of(node) == _COMPILE or isinstance(node, cst.Call) and code_of(node.func) == _COMPILE


def _rewritten(files: Mapping[str, str], transformer_for: Callable[[], cst.CSTTransformer]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    changed = False
    for name, text in files.items():
        if not name.endswith(".py") or _COMPILE not in text:
            out[name] = text
            continue
        try:
            new = cst.parse_module(text).visit(transformer_for()).code
        except cst.ParserSyntaxError:
            return None
        changed |= new != text
        out[name] = new
    return out if changed else None


def _seen(files: Mapping[str, str]) -> _Compiles | None:
    seen = _Compiles()
    for name, text in files.items():
        if name.endswith(".py") and _COMPILE in text:
            try:
                cst.parse_module(text).visit(seen)
            except cst.ParserSyntaxError:
                return None
    return seen if seen.keywords else None


def compile_backend(files: Mapping[str, str]) -> str | None:
    """The backend the program's torch.compile calls name (``inductor`` when none does),
    or None for a program that does not call torch.compile."""
    seen = _seen(files)
    if seen is None:
        return None
    given = {k: v for kw in seen.keywords for k, v in kw.items()}
    return given.get("backend", '"inductor"').strip("'\"")


def compile_changes(files: Mapping[str, str]) -> list[Change]:
    """The compile settings to change one at a time, for a program that calls
    ``torch.compile``; none for one that does not."""
    seen = _seen(files)
    if seen is None:
        return []
    given = {k: v for kw in seen.keywords for k, v in kw.items()}
    backend = compile_backend(files)
    changes: list[Change] = []

    def add(name: str, what: str, new: dict[str, str] | None) -> None:
        if new is not None:
            changes.append(Change(name, what, new, BACKEND, edit=diff_of(files, new)))

    if not seen.partials:
        add("torch.compile off", "the same program run eagerly: whether compilation is needed at all",
            _rewritten(files, _Uncompile))
    for other, what in BACKENDS.items():
        if other != backend:
            add(f'backend="{other}"', what, _rewritten(files, lambda o=other: _SetKeyword("backend", f'"{o}"')))
    if given.get("fullgraph") == "True":
        add("fullgraph=False", "graph breaks allowed: whether the error is a graph break that fullgraph turns fatal",
            _rewritten(files, lambda: _SetKeyword("fullgraph", "False")))
    for value, what in (("False", "shapes specialised: whether dynamic shapes are involved"),
                        ("True", "shapes dynamic from the first call")):
        if given.get("dynamic") != value:
            add(f"dynamic={value}", what, _rewritten(files, lambda v=value: _SetKeyword("dynamic", v)))
    return changes


def summary(found: list[Outcome], backend: str | None) -> str | None:
    """What the backend comparison says about the stage, in one sentence, or None.
    ``backend``: the one the case uses, where it fails by definition."""
    by = {o.change: o.result for o in found}
    if not by:
        return None
    if backend is not None:
        by.setdefault(f'backend="{backend}"', "same bug")
    if by.get("torch.compile off") == "same bug":
        return "the same bug without torch.compile: it is not a compile failure (see the other families' advice)"
    if by.get('backend="eager"') == "same bug":
        return "fails with backend=\"eager\": Dynamo's tracing (or its guards) is where it breaks"
    if by.get('backend="aot_eager"') == "same bug" and by.get('backend="eager"') == "passes":
        return "passes with backend=\"eager\" but fails with \"aot_eager\": AOT autograd is where it breaks"
    if by.get('backend="eager"') == "passes" and by.get('backend="aot_eager"') == "passes":
        return f"passes with the eager backends: the compiler ({backend}) is where it breaks"
    return None
