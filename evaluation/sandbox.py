"""What a candidate's run directory costs: reset and used again, against made anew and
removed (what every run paid before, and what ``--keep-temp`` still does, removed here).

    python -m evaluation.sandbox [ROOT] [--runs N]

ROOT (default: this repository, the directory the README's first command copies) is the
user's directory.  Each run writes one program file and one output file, as a candidate
does; the figures are milliseconds per run on this machine, measured in the same
process one after the other, and their ratio.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from shrinkgpu.worker.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]


def per_run(root: Path, runs: int, *, reuse: bool) -> tuple[float, int]:
    """Milliseconds per run, and the files the template holds."""
    script = next((p for p in sorted(root.rglob("*.py")) if ".venv" not in p.parts), None)
    rel = str(script.relative_to(root)) if script else "s.py"
    with Sandbox(root, keep=not reuse) as sandbox:
        started = time.perf_counter()
        for _ in range(runs):
            run = sandbox.prepare({rel: "print('candidate')\n"}, omit={rel})
            (run.root / "written-by-the-run.txt").write_text("x")
            sandbox.release(run)
            if not reuse:  # kept by --keep-temp: removed here, as every run once was
                shutil.rmtree(run.path)
        seconds = time.perf_counter() - started
        files = len(list(sandbox.template.rglob("*")))
    if not reuse:  # a kept session is left by close(): the template goes too
        shutil.rmtree(sandbox.session, ignore_errors=True)
    return seconds / runs * 1000, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    root = args.root.resolve()
    fresh, files = per_run(root, args.runs, reuse=False)
    reset, _ = per_run(root, args.runs, reuse=True)
    print("| root | entries in the copy | made and removed | reset | ratio |")
    print("|---|---|---|---|---|")
    print(f"| {root} | {files} | {fresh:.1f} ms | {reset:.1f} ms | {fresh / reset:.1f}x |")


if __name__ == "__main__":
    main()
