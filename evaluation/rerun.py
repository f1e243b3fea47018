"""Does each written result fail the same way when run as its report says, again and
again?  For every ``*.min.json`` case file under the given folders: the result run
``--runs`` times (5 by default) in fresh interpreters, as its command runs it (under the
real ``torchrun`` with its ranks, or as plain ``python`` when the reduction found it
reproduces without torch.distributed), each judged by shrinkgpu's own rule against the
original's first error (``Target``: --keep-error and the same bug).

    python -m evaluation.rerun bench-envs/runs/<run>          # every result under it
    python -m evaluation.rerun out/ --runs 5 --json

Each run is a copy of the result's folder (nothing is written into it).  Exits 1 when
any result fails otherwise in any run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.signature import Signature, Strictness, Target
from shrinkgpu.worker import Isolation, Runner, ScriptSpec


def target_of(case: dict) -> Target:
    pattern = re.compile(case["keep_error"], re.M) if case.get("keep_error") else None
    return Target(Signature.from_json(case["signature"]), pattern, Strictness(case.get("strictness", "strict")))


def rerun(case_file: Path, runs: int, timeout: float | None) -> dict:
    case = json.loads(case_file.read_text(encoding="utf-8"))
    written = case_file.with_name(case["case"])
    nproc = case.get("nproc_per_node")
    launch = Launch(nproc=int(nproc), ranks=True) if nproc else PLAIN
    script, root = (written / case["main"], written) if written.is_dir() else (written, written.parent)
    spec = ScriptSpec(script=script, args=tuple(case.get("args") or ()), cwd=root, root=root, launch=launch,
                      argv0=script.name)
    target = target_of(case)
    limit = timeout or float(case.get("timeout_fresh") or 600.0)
    seen = []
    with Runner(spec, isolation=Isolation.FRESH) as runner:
        runner.start()
        for _ in range(runs):
            obs = runner.run({spec.script_rel: script.read_text(encoding="utf-8")}, timeout=limit)
            seen.append({"same": target.matches(obs.signature), "what": obs.describe(), "rank": obs.rank})
    return {"result": str(written), "command": launch.command(script.name, spec.args),
            "same": sum(s["same"] for s in seen), "runs": runs, "seen": seen}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.rerun", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default: the case file's)")
    ap.add_argument("--json", action="store_true", help="one JSON line per result")
    ns = ap.parse_args(argv)
    bad = 0
    for folder in ns.folders:
        for case_file in sorted(folder.rglob("*.min.json")):
            row = rerun(case_file, ns.runs, ns.timeout)
            bad += row["same"] < row["runs"]
            if ns.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['same']}/{row['runs']}  {row['command']}  ({row['result']})", flush=True)
                for s in row["seen"]:
                    if not s["same"]:
                        print(f"      otherwise: {s['what']}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
