"""What a candidate of N ranks costs: forked from the preloaded server (how shrinkgpu runs
candidates) against the real ``torchrun`` starting fresh interpreters (how the user runs
the script), on the same script, in one run.

    python -m evaluation.ranks_cost dist_ddp_aux_head              # the case's script and its ideal cut
    python -m evaluation.ranks_cost dist_ddp_aux_head --fork-runs 15 --torchrun-runs 5

For each program: the wall time of ``torchrun --standalone --nproc-per-node N`` as a
subprocess (what a reducer that shells out pays per candidate), shrinkgpu's own
``Torchrun`` executor (the same, with the probe in each rank), and the forked ranks
(``Ranks`` over the fork server, preloaded with what the program imported); medians,
and the ratio torchrun / forked.  Prints a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from evaluation import catalog
from shrinkgpu.launch import Launch
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch, preload_candidates


def torchrun_walls(script: Path, nproc: int, runs: int) -> list[float]:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                        script.name], cwd=script.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=900)
        walls.append(time.perf_counter() - started)
    return walls


def shrinkgpu_walls(script: Path, nproc: int, runs: int, isolation: Isolation, preload=()) -> tuple[list[float], list]:
    spec = ScriptSpec(script=script, cwd=script.parent, root=script.parent, launch=Launch(nproc=nproc, ranks=True),
                      argv0=script.name)
    files = {spec.script_rel: script.read_text(encoding="utf-8")}
    walls, seen = [], []
    with Runner(spec, isolation=isolation) as runner:
        runner.start(preload)
        for _ in range(runs):
            started = time.perf_counter()
            obs = runner.run(files, timeout=900, watch=Watch(collect_modules=not preload))
            walls.append(time.perf_counter() - started)
            seen.append(obs)
    return walls, seen


def measure(script: Path, nproc: int, fork_runs: int, torchrun_runs: int) -> dict:
    fresh, seen = shrinkgpu_walls(script, nproc, torchrun_runs, Isolation.FRESH)
    modules = preload_candidates(seen[0].modules, [script.parent])
    forked, forked_seen = shrinkgpu_walls(script, nproc, fork_runs, Isolation.FORK, modules)
    real = torchrun_walls(script, nproc, torchrun_runs)
    med = {k: statistics.median(v) for k, v in (("torchrun", real), ("fresh", fresh), ("fork", forked))}
    return {"program": script.name, "nproc": nproc, **{f"{k}_median": round(v, 3) for k, v in med.items()},
            "ratio": round(med["torchrun"] / med["fork"], 1), "fork_runs": fork_runs, "torchrun_runs": torchrun_runs,
            "first_error": forked_seen[-1].describe()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.ranks_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--fork-runs", type=int, default=15)
    ap.add_argument("--torchrun-runs", type=int, default=5)
    ns = ap.parse_args(argv)
    rows = []
    for name in ns.cases:
        case = catalog.load(name)
        nproc = case.nproc_per_node or 2
        for script in (case.dir / case.script, case.dir / "ideal_cut.py"):
            if script.is_file():
                rows.append(measure(script, nproc, ns.fork_runs, ns.torchrun_runs))
                print(rows[-1], file=sys.stderr, flush=True)
    print("| program | ranks | torchrun (s) | shrinkgpu fresh ranks (s) | forked ranks (s) | torchrun / forked |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['program']} | {r['nproc']} | {r['torchrun_median']} | {r['fresh_median']} | {r['fork_median']} | "
              f"{r['ratio']}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
