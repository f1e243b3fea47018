"""The reduced program as a person would leave it: comments that still describe code,
no commented-out code, no trailing whitespace or runs of blank lines.

Comments are free for the search (tokens do not count them), so deleting code leaves
the comments that were around it: a notebook's ``# ## Summary`` and ``# ---`` above three
remaining lines, a ``#TODO`` about a removed layer, ``# invalid class`` beside a value the
reduction changed.  ``tidy`` keeps a comment only while what it belongs to is there and
unchanged:

- a comment on a code line stays when that line, comment included, is a line of the
  original (the reduction did not change what it describes);
- a block of comments directly above a statement stays with it on the same terms (its
  first line is the original's); a block with a blank line under it belongs to a section,
  not to a statement, and goes (notebook cell markers ``# In[3]:`` stay above a cell that
  kept code);
- commented-out code (``#self.dropout = nn.Dropout(p)``) goes;
- the first lines' ``#!`` and coding cookie stay.

A statement directly under a function's or class's body, where the blank lines that
separated them belonged to a statement the reduction removed, gets the separation the
original puts around its definitions (``def gate(x):\n    return x\nfn = ...`` is no
one's style).

Only comments and blank lines change: the program runs as before (its line numbers
move, so the result is verified after this, not before).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from typing import cast

__all__ = ["is_commented_code", "tidy"]

_CELL = re.compile(r"^# In\[\s*\d*\s*\]:\s*$")
_COOKIE = re.compile(r"^#.*coding[:=]")


def is_commented_code(comment: str) -> bool:
    """Whether a comment's text is a commented-out statement rather than prose."""
    text = comment.lstrip("#").strip()
    if not text or not any(c in text for c in "=()[]."):
        return False
    if re.match(r"^(TODO|FIXME|XXX|NOTE|HACK)\b", text, re.I):
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    # ``x.y`` or ``f(x)`` alone could be prose with a dot; an assignment, a call with
    # arguments, an import or a control statement is code
    node = tree.body[0] if tree.body else None
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Call)
    return node is not None


def _comment_lines(text: str) -> dict[int, tuple[int, bool]]:
    """{line number: (column of the comment, whether the line holds only the comment)}."""
    out: dict[int, tuple[int, bool]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                line = tok.line
                out[row] = (col, not line[:col].strip())
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    return out


def tidy(text: str, originals: list[str]) -> str:
    """``text`` with the comments that no longer describe code taken out, trailing
    whitespace and runs of more than two blank lines removed.  ``originals``: the texts
    the program was reduced from (its lines are what "unchanged" means)."""
    text = _separated(text, originals)
    comments = _comment_lines(text)
    if not comments and text == _spaced(text):
        return text
    known = {line.strip() for original in originals for line in original.splitlines()}
    lines = text.splitlines()
    keep = [True] * len(lines)
    n = len(lines)
    i = 0
    while i < n:
        row = i + 1
        if row not in comments:
            i += 1
            continue
        col, alone = comments[row]
        if not alone:
            # a comment on a code line: only while the line is the original's
            if lines[i].strip() not in known or is_commented_code(lines[i][col:]):
                lines[i] = lines[i][:col].rstrip()
            i += 1
            continue
        # a block of comment lines
        j = i
        while j < n and (j + 1) in comments and comments[j + 1][1]:
            j += 1
        block = range(i, j)
        after = j  # the line below the block
        belowis_commented_code = after < n and lines[after].strip() != ""
        header = i == 0 and (lines[0].startswith("#!") or _COOKIE.match(lines[0]))
        for k in block:
            if k <= 1 and (lines[k].startswith("#!") or _COOKIE.match(lines[k])):
                continue  # the interpreter line and the coding cookie
            if header and k == 0:
                continue
            comment = lines[k].strip()
            if _CELL.match(comment):
                # a notebook cell's marker: above code of its cell, or not at all
                nxt = next((lines[m].strip() for m in range(k + 1, n) if lines[m].strip()), "")
                keep[k] = bool(nxt) and not nxt.startswith("#")
                continue
            if is_commented_code(comment):
                keep[k] = False
            elif not belowis_commented_code:
                keep[k] = False  # a section's comment: the code it introduced is gone
            elif lines[after].strip() not in known:
                keep[k] = False  # the statement it describes was changed
        i = j
    kept = [line.rstrip() for line, k in zip(lines, keep) if k]
    return _spaced("\n".join(kept) + ("\n" if text.endswith("\n") or kept else ""))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])


def _blocks(tree: ast.Module) -> list[tuple[list[ast.stmt], bool]]:
    """The module's body and each class's body (at any depth), with whether it is the
    module's: where definitions sit beside other statements."""
    out: list[tuple[list[ast.stmt], bool]] = [(tree.body, True)]
    out += [(node.body, False) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    return out


def _gaps(text: str) -> tuple[Counter[int], Counter[int]]:
    """How many blank lines separate a definition from its neighbours in ``text``: at
    the top level, and between a class's members."""
    top: Counter[int] = Counter()
    members: Counter[int] = Counter()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return top, members
    lines = text.splitlines()
    for body, module in _blocks(tree):
        for prev, node in zip(body, body[1:]):
            if isinstance(prev, _DEFINITIONS) or isinstance(node, _DEFINITIONS):
                between = lines[prev.end_lineno:_first_line(node) - 1]
                (top if module else members)[sum(1 for ln in between if not ln.strip())] += 1
    return top, members


def _separated(text: str, originals: list[str]) -> str:
    """``text`` with the original's blank lines between a definition and a statement
    that the reduction made neighbours with none between them."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text
    top: Counter[int] = Counter()
    members: Counter[int] = Counter()
    for original in originals:
        t, m = _gaps(original)
        top.update(t)
        members.update(m)
    # The original's usual separation; PEP 8's when it has no definition beside another
    # statement to learn from.
    gap_top = top.most_common(1)[0][0] if top else 2
    gap_member = members.most_common(1)[0][0] if members else 1
    lines = text.splitlines()
    inserts: list[tuple[int, int]] = []  # (after this many lines, blank lines)
    for body, module in _blocks(tree):
        gap = gap_top if module else gap_member
        for prev, node in zip(body, body[1:]):
            if not (isinstance(prev, _DEFINITIONS) or isinstance(node, _DEFINITIONS)) or not gap:
                continue
            end = cast(int, prev.end_lineno)  # (set on every statement ast.parse makes)
            between = lines[end:_first_line(node) - 1]
            if any(not ln.strip() for ln in between) or end >= _first_line(node):
                continue  # separated already, or on one line (``class A: pass``)
            inserts.append((end, gap))
    if not inserts:
        return text
    for at, gap in sorted(inserts, reverse=True):
        lines[at:at] = [""] * gap
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def _spaced(text: str) -> str:
    """No trailing whitespace, at most two blank lines in a row, none at the end."""
    out: list[str] = []
    blank = 0
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            blank += 1
            if blank > 2:
                continue
        else:
            blank = 0
        out.append(line)
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return "\n".join(out) + "\n" if out else ""
