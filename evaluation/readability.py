"""What a maintainer would have to clean up by hand in the written results of a run:
orphaned comments and placeholders the reduction introduced (issue 24).

    python -m evaluation.readability RUN_DIR [RUN_DIR ...] [--measure]

RUN_DIR is an ``evaluation.run`` workdir (``<case>/shrinkgpu/out/``); each result is
compared with the case it came from.  Counted per result:

- *orphaned comments*: a comment on a line of its own with no statement directly under
  it (a blank line or the end of the file follows), other than the first lines' ``#!``
  and coding cookie; a comment that is commented-out code;
- *placeholders*: lines the original does not have that no person writes: a
  self-assignment (``h = h``), a bound ``self`` outside a method (``self = 0``), a bare
  name or constant as a statement (``h``), subscripting a literal (``0[0]``).

These counts steer how results are tidied, so this is a tuning script: results of
held-out cases are left out unless ``--measure`` says the count is a measurement.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize
from pathlib import Path

_COOKIE = re.compile(r"^#!|^#.*coding[:=]")


def orphaned_comments(text: str) -> list[str]:
    from shrinkgpu.syntax.tidy import is_commented_code  # the same test the results are tidied with

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
        if re.match(r"^# In\[\s*\d*\s*\]:\s*$", tok.string):
            # a notebook cell's marker: fine above code of its cell
            nxt = next((ln.strip() for ln in lines[row:] if ln.strip()), "")
            if not nxt or nxt.startswith("#"):
                out.append(tok.string)
            continue
        below = next((ln for ln in lines[row:] if not ln.strip().startswith("#") or not ln.strip()), "")
        if not below.strip() or is_commented_code(tok.string):
            out.append(tok.string)
    return out


def placeholders(text: str, originals: list[str]) -> list[str]:
    known = {ln.strip() for o in originals for ln in o.splitlines()}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    lines = text.splitlines()

    class Visit(ast.NodeVisitor):
        depth_in_def = 0

        def visit_FunctionDef(self, node):
            self.depth_in_def += 1
            self.generic_visit(node)
            self.depth_in_def -= 1

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Assign(self, node):
            line = lines[node.lineno - 1].strip()
            for t in node.targets:
                if isinstance(t, ast.Name) and isinstance(node.value, ast.Name) and t.id == node.value.id:
                    found.append(line)
                if isinstance(t, ast.Name) and t.id == "self" and not self.depth_in_def:
                    found.append(line)
            self.generic_visit(node)

        def visit_Expr(self, node):
            if isinstance(node.value, (ast.Name, ast.Attribute)) or (
                isinstance(node.value, ast.Constant) and not isinstance(node.value.value, str)
            ):
                found.append(lines[node.lineno - 1].strip())
            self.generic_visit(node)

        def visit_Subscript(self, node):
            if isinstance(node.value, ast.Constant) and not isinstance(node.value.value, (str, bytes)):
                found.append(ast.unparse(node))
            self.generic_visit(node)

    Visit().visit(tree)
    return [f for f in found if f not in known]


def results(run: Path, measure: bool = False):
    """(case name, result files, original files) for each result in a run; held-out
    cases only when ``measure``."""
    from evaluation import catalog

    for out in sorted(run.glob("*/shrinkgpu/out")):
        name = out.parents[1].name
        try:
            case = catalog.load(name)
        except KeyError:
            continue  # a generated script of the scaling part: no original to compare with
        if case.held_out and not measure:
            continue
        written = [p for p in out.rglob("*.py") if not p.name.endswith(".extracted.py")]
        originals = [p for p in case.dir.rglob("*.py") if p.name != "ideal_cut.py"]
        yield name, written, originals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--measure", action="store_true", help="count held-out cases too (a measurement, not tuning)")
    args = ap.parse_args(argv)
    for run in args.runs:
        print(f"## {run}\n\n| result | orphaned comments | placeholders |\n| --- | ---: | ---: |")
        total_c = total_p = 0
        for name, written, originals in results(run, args.measure):
            texts = [o.read_text(encoding="utf-8", errors="replace") for o in originals]
            comments = [c for w in written for c in orphaned_comments(w.read_text(encoding="utf-8"))]
            holders = [p for w in written for p in placeholders(w.read_text(encoding="utf-8"), texts)]
            total_c += len(comments)
            total_p += len(holders)
            shown = "; ".join(f"`{x}`" for x in (comments + holders)[:3])
            print(f"| {name} | {len(comments)} | {len(holders)} |" + (f" {shown}" if shown else ""))
        print(f"| **all** | {total_c} | {total_p} |\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
