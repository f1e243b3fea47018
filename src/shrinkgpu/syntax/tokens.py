"""Program size in tokens: what the reducer minimises and what reports compare."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=512)
def measure(source: str) -> tuple[int, int, int, int]:
    """(tokens, blocks, loops, magnitude) in one tokenization: what a candidate's order
    needs, computed once per distinct file text (a multi-file program's untouched files
    are not tokenized again for every candidate).  ``magnitude`` is the sum of the
    integer literals, each capped."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return count_tokens(source), 0, 0, 0
    significant = blocks = loops = magnitude = 0
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT)
    prev = None
    for tok in tokens:
        kind = tok.type
        if kind in _SIGNIFICANT:
            significant += 1
            if kind == tokenize.NUMBER and tok.string.isdigit():
                magnitude += min(int(tok.string), 1_000_000)
            elif kind == tokenize.NAME and tok.string in ("for", "while"):
                if prev is None or prev.type in starts or (prev.type == tokenize.NAME and prev.string == "async"):
                    loops += 1
        elif kind == tokenize.INDENT:
            blocks += 1
        if kind not in (tokenize.NL, tokenize.COMMENT):
            prev = tok
    return significant, blocks, loops, magnitude
