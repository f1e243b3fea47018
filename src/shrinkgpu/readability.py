"""What a maintainer would have to clean up by hand in a written result: orphaned
comments and placeholders the reduction introduced (issue 24).

- *orphaned comments*: a comment on a line of its own with no statement directly under
  it (a blank line or the end of the file follows), other than the first lines' ``#!``
  and coding cookie; a comment that is commented-out code;
- *placeholders*: lines the original does not have that no person writes: a
  self-assignment (``h = h``), a bound ``self`` outside a method (``self = 0``), a bare
  name or constant as a statement (``h``), subscripting a literal (``0[0]``); and
  stand-ins for objects the failing call never uses (``syntax.placeholders``): a name
  bound to a literal and used as an object (``self = 0`` before ``self.acc =
  Accuracy()``, in a function too), a call of the program's own class or function that
  cannot take the arguments it is given (``Trainer(0, 0, loss, callbacks=[...])`` of a
  ``class Trainer: pass``).

The end-to-end tests hold every result to zero of both, and ``evaluation.readability``
counts them over an evaluation run; both read them from here, so the rule a result is
tidied by (``syntax.tidy``) or shrunk by (``syntax.placeholders``) and the rule it is
judged by cannot drift apart.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from shrinkgpu.syntax import placeholders as stand_ins
from shrinkgpu.syntax.tidy import is_commented_code

_COOKIE = re.compile(r"^#!|^#.*coding[:=]")
_CELL_MARKER = re.compile(r"^# In\[\s*\d*\s*\]:\s*$")


def orphaned_comments(text: str) -> list[str]:
    """The orphaned comments of ``text`` in the order they appear; none for a text that
    does not tokenize."""
    lines = text.splitlines()
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        alone = not tok.line[:col].strip()
        if row <= 2 and _COOKIE.match(tok.string):
            continue
        if not alone:
            if is_commented_code(tok.string):
                out.append(tok.string)
            continue
        if _CELL_MARKER.match(tok.string):
            # a notebook cell's marker: fine above code of its cell
            nxt = next((ln.strip() for ln in lines[row:] if ln.strip()), "")
            if not nxt or nxt.startswith("#"):
                out.append(tok.string)
            continue
        below = next((ln for ln in lines[row:] if not ln.strip().startswith("#") or not ln.strip()), "")
        if not below.strip() or is_commented_code(tok.string):
            out.append(tok.string)
    return out


class _Placeholders(ast.NodeVisitor):
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.found: list[str] = []
        self.depth_in_def = 0

    def visit_FunctionDef(self, node):
        self.depth_in_def += 1
        self.generic_visit(node)
        self.depth_in_def -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        line = self.lines[node.lineno - 1].strip()
        for t in node.targets:
            if isinstance(t, ast.Name) and isinstance(node.value, ast.Name) and t.id == node.value.id:
                self.found.append(line)
            if isinstance(t, ast.Name) and t.id == "self" and not self.depth_in_def:
                self.found.append(line)
        self.generic_visit(node)

    def visit_Expr(self, node):
        if isinstance(node.value, (ast.Name, ast.Attribute)) or (
            isinstance(node.value, ast.Constant) and not isinstance(node.value.value, str)
        ):
            self.found.append(self.lines[node.lineno - 1].strip())
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.value, ast.Constant) and not isinstance(node.value.value, (str, bytes)):
            self.found.append(ast.unparse(node))
        self.generic_visit(node)


def placeholders(text: str, originals: list[str]) -> list[str]:
    """The placeholder lines of ``text`` that no text of ``originals`` has (stripped);
    none for a text that does not parse."""
    known = {ln.strip() for o in originals for ln in o.splitlines()}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    visit = _Placeholders(text.splitlines())
    visit.visit(tree)
    # A stand-in the original has is the user's (a call that cannot take its arguments
    # may be the very bug), compared as the rule writes it, not line by line.
    theirs = {f for o in originals for f in stand_ins.in_text(o)}
    found = visit.found + [f for f in stand_ins.in_text(text) if f not in theirs and f not in visit.found]
    return [f for f in found if f not in known]
