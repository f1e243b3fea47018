"""The ``versions`` corpus (suite ``versions``): each case asked what its ``[versions]``
table in case.toml says, with ``shrinkgpu versions --json``, and the answer compared with
the one written there before it ran.  Twice: the first call builds the environments
(or finds them in the cache), the second must build none.

    python -m evaluation.versions_corpus [--cases a,b] [--cache DIR] [--out FILE]

Prints one line per case and writes the rows (seconds per environment built and per
environment reused, what each version gave) as JSON; docs/benchmarks.md has the figures.
The torch cases build torch 2.14.1 and 2.15.0 (CUDA builds, about 3 GB each, the first
time); the transformers case downloads a few releases.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "evaluation" / "cases"


def cases(names: list[str] | None) -> list[Path]:
    found = []
    for toml in sorted(CASES.glob("*/case.toml")):
        data = tomllib.loads(toml.read_text(encoding="utf-8"))
        if data.get("suite") == "versions" and (not names or toml.parent.name in names):
            found.append(toml.parent)
    return found


def ask(case: Path, cache: Path) -> tuple[dict, float]:
    data = tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))
    asked = data["versions"]
    cmd = [sys.executable, "-m", "shrinkgpu", "versions", "--json", data["script"], "-k", data["keep_error"]]
    if "range" in asked:
        cmd += ["--range", *asked["range"]]
    for pin in asked.get("try", ()):
        cmd += ["--try", pin]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True,
                          env={**os.environ, "SHRINKGPU_VERSIONS_CACHE": str(cache)})
    answer = json.loads(done.stdout) if done.stdout.strip() else {"error": done.stderr[-2000:]}
    return answer, time.monotonic() - started


def judged(case: Path, answer: dict) -> tuple[bool, str]:
    """Whether the answer is the one case.toml expected, and what it said."""
    asked = tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))["versions"]
    if answer.get("error"):
        return False, f"error: {answer['error']}"
    if "boundary" in asked:
        got = answer.get("boundary") or {}
        ok = [got.get("older"), got.get("newer")] == asked["boundary"]
        return ok, answer["sentence"]
    verdicts = {v["version"].split("+")[0]: v["minimal_case"]["verdict"] for v in answer["versions"]}
    ok = all(verdicts.get(k) == v for k, v in asked["expect"].items())
    return ok, answer["sentence"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=None)
    parser.add_argument("--cache", type=Path, default=REPO / "bench-envs" / "versions-cache")
    parser.add_argument("--out", type=Path, default=REPO / "bench-envs" / "versions-corpus.json")
    opts = parser.parse_args(argv)
    rows = []
    for case in cases(opts.cases.split(",") if opts.cases else None):
        first, first_s = ask(case, opts.cache)
        second, second_s = ask(case, opts.cache)
        ok, said = judged(case, first)
        row = {"case": case.name, "ok": ok, "sentence": said, "seconds_first": round(first_s, 1),
               "seconds_second": round(second_s, 1), "built": first.get("environments_built"),
               "build_seconds": first.get("build_seconds"), "reused_first": first.get("environments_reused"),
               "built_second": second.get("environments_built"), "reused_second": second.get("environments_reused"),
               "same_answer_twice": first.get("sentence") == second.get("sentence"), "answer": first}
        rows.append(row)
        print(f"{'ok  ' if ok else 'MISS'} {case.name}: {said} | first call {first_s:.0f} s "
              f"({row['built']} built in {row['build_seconds']} s, {row['reused_first']} reused), second "
              f"{second_s:.0f} s ({row['built_second']} built, {row['reused_second']} reused)", flush=True)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
