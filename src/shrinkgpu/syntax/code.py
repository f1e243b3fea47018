"""Source text of libcst nodes, and expressions that stand in any position."""

from __future__ import annotations

import ast

import libcst as cst

__all__ = ["calls_named", "code_of", "module_name", "parse_expression"]


_EMPTY_MODULE = cst.Module(body=[])


def code_of(node: cst.CSTNode) -> str:
    """Source text of any node, with the default formatting of an empty module."""
    return _EMPTY_MODULE.code_for_node(node)


_ATOMS = (
    cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
    cst.FormattedString, cst.Call, cst.Attribute, cst.Subscript, cst.List, cst.Dict, cst.Set,
    cst.Ellipsis, cst.ListComp, cst.SetComp, cst.DictComp,
)


def parse_expression(text: str) -> cst.BaseExpression:
    """The expression for ``text``, parenthesised unless it is an atom, so it can stand
    in any position without changing how the code around it parses."""
    expr = cst.parse_expression(text)
    if isinstance(expr, _ATOMS) or getattr(expr, "lpar", None):
        return expr
    return cst.parse_expression(f"({text})")


def calls_named(source: str, name: str) -> list:
    """The ``ast.Call`` nodes in a line of source whose callee is spelled ``name`` or
    ``something.name`` (``F.cross_entropy``, ``torch.gather``), in walk order; none when
    the line does not parse alone.  (``ast``, not libcst: a recorded frame's line, for
    its argument positions and source segments, never a program to edit.)"""
    try:
        tree = ast.parse(source.strip())
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if called == name:
                out.append(node)
    return out


def module_name(text: str, module: str) -> str | None:
    """The name the file's top level binds ``module`` to (``np`` for ``import numpy as
    np``, ``torch`` for ``import torch`` or ``import torch.nn``), or None.  A function
    then uses that global; an ``import`` of the name inside it would make the name local
    to the whole function (an UnboundLocalError above it)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None and alias.name == module:
                    return alias.asname
                if alias.asname is None and alias.name.split(".")[0] == module:
                    return module
    return None
