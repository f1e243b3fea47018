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
  name or constant as a statement (``h``), subscripting a literal (``0[0]``), a name
  bound to a literal and used as an object (``self = 0`` then ``self.acc = ...``, in a
  function too), a call of the result's own class or function that cannot take its
  arguments (``Trainer(0, 0, ...)`` of a ``class Trainer: pass``).

These counts steer how results are tidied, so this is a tuning script: results of
held-out cases are left out unless ``--measure`` says the count is a measurement.  The
two counters are ``shrinkgpu.readability``'s, the ones the end-to-end tests hold every
result to.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from shrinkgpu.readability import orphaned_comments, placeholders


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
