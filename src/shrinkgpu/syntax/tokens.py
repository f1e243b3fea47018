"""Program size in tokens: what the reducer minimises and what reports compare."""

from __future__ import annotations

import io
import re
import tokenize

_SIGNIFICANT = {tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING}
for _name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END"):
    if hasattr(tokenize, _name):
        _SIGNIFICANT.add(getattr(tokenize, _name))
_FALLBACK = re.compile(r"\w+|[^\w\s]")


def count_tokens(source: str) -> int:
    """Names, operators, numbers and strings; comments, blank lines and indentation are
    free, so formatting never decides between two candidates."""
    try:
        return sum(
            1 for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type in _SIGNIFICANT
        )
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return len(_FALLBACK.findall(re.sub(r"#[^\n]*", "", source)))


def count_blocks(source: str) -> int:
    """Indented blocks (loops, branches, functions, classes, ``with``, ``try``)."""
    try:
        return sum(1 for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.INDENT)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return 0
