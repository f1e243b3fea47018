"""Whether two runs wrote the same programs: for a change that must not change any result
(a redesign), every case's result and extracted call are diffed between two
``--workdir``s of ``python -m evaluation.run``.

    python -m evaluation.diff_outputs RUN_BEFORE RUN_AFTER [--measure]

Prints one line per result (``same`` or ``DIFFERENT``, with a unified diff) and exits 1
when any differs or is missing on one side.  Run both with the same ``PYTHONHASHSEED``:
the reducer's own set iteration order otherwise picks different, equally good paths.

Comparing a change's before and after is tuning, so the results of held-out cases are
left out unless ``--measure`` says the comparison is a measurement.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

# What a result is: the program and the call alone, not the report (it holds timings).
RESULT_GLOBS = ("*.min.py", "*.min/**/*.py", "*.extracted.py")


def held_out(out_dir: Path) -> bool:
    """Whether the result directory ``<case>/shrinkgpu/out`` belongs to a held-out case."""
    from evaluation import catalog

    try:
        return catalog.load(out_dir.parents[1].name).held_out
    except KeyError:
        return False  # a generated script (the scaling part)


def results(run: Path, measure: bool = False) -> dict[str, str]:
    """Relative path under ``run`` -> text, of every result file of every reduction
    (held-out cases only when ``measure``)."""
    out = {}
    for out_dir in sorted(run.glob("**/shrinkgpu/out")):
        if not measure and held_out(out_dir):
            continue
        for pattern in RESULT_GLOBS:
            for path in sorted(out_dir.glob(pattern)):
                out[str(path.relative_to(run))] = path.read_text(encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.diff_outputs", description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--measure", action="store_true", help="compare held-out cases too (a measurement, not tuning)")
    args = ap.parse_args(argv)
    before, after = results(args.before, args.measure), results(args.after, args.measure)
    differ = 0
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            print(f"MISSING in {'before' if key not in before else 'after'}: {key}")
            differ += 1
        elif before[key] == after[key]:
            print(f"same       {key}")
        else:
            differ += 1
            print(f"DIFFERENT  {key}")
            sys.stdout.writelines(difflib.unified_diff(
                before[key].splitlines(keepends=True), after[key].splitlines(keepends=True), "before", "after"))
    print(f"{len(set(before) | set(after)) - differ} same, {differ} different or missing")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
