"""What a candidate of a script that starts its own ranks costs (``mp.spawn``), against
the same program in its torchrun form, in one run: the ranks forked from the preloaded
server (spawned ranks from the candidate's zygote; torchrun's ranks by ``Ranks``), and,
for scale, each form as the user runs it (new interpreters).

    python -m evaluation.spawn_cost                  # the built-in DDP step, 2 ranks
    python -m evaluation.spawn_cost --ranks 4 --runs 15

Prints a markdown table of median wall seconds per candidate, and the ratio spawn /
torchrun of the forked forms (issue 55's target: within 2x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shrinkgpu.launch import Launch
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch, preload_candidates

STEP = """\
import os
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def step(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    x = torch.randn(8, 16)
    y = torch.randint(0, 4, (8,)) + (rank == world - 1)  # the last rank's labels count from 1
    F.cross_entropy(model(x), y).backward()
    dist.destroy_process_group()
"""

SPAWNED = STEP + """

if __name__ == "__main__":
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = os.environ.get("PORT", "29611")
    mp.spawn(step, args=(WORLD,), nprocs=WORLD)
"""

TORCHRUN = STEP + """

step(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
"""


def walls(script: Path, launch: Launch, isolation: Isolation, runs: int, preload=()) -> tuple[list[float], list]:
    spec = ScriptSpec(script=script, cwd=script.parent, root=script.parent, launch=launch, argv0=script.name)
    files = {spec.script_rel: script.read_text(encoding="utf-8")}
    out, seen = [], []
    with Runner(spec, isolation=isolation) as runner:
        runner.start(preload, required=isolation is Isolation.FORK)
        for _ in range(runs):
            started = time.perf_counter()
            obs = runner.run(files, timeout=300, watch=Watch(collect_modules=not preload))
            out.append(time.perf_counter() - started)
            seen.append(obs)
    return out, seen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10, help="forked candidates of each form")
    parser.add_argument("--fresh-runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spawn-cost-") as tmp:
        root = Path(tmp)
        (root / "spawned.py").write_text(SPAWNED.replace("WORLD", str(args.ranks)))
        (root / "torchrun.py").write_text(TORCHRUN)
        spawn_launch = Launch(starter="mp.spawn", fresh_children=2)
        ranks_launch = Launch(nproc=args.ranks, ranks=True)
        rows = {}
        for name, launch in (("mp.spawn", spawn_launch), ("torchrun", ranks_launch)):
            script = root / ("spawned.py" if name == "mp.spawn" else "torchrun.py")
            fresh, seen = walls(script, launch, Isolation.FRESH, args.fresh_runs)
            first = next(o for o in seen if o.signature is not None)
            preload = preload_candidates(first.modules, [root])
            forked, forked_seen = walls(script, launch, Isolation.FORK, args.runs, preload)
            same = all(o.signature is not None and o.signature.same_bug(first.signature) for o in forked_seen)
            rows[name] = (statistics.median(fresh), statistics.median(forked), first, same)
            print(f"{name}: fresh {rows[name][0]:.2f}s, forked {rows[name][1]:.2f}s, "
                  f"{first.describe()}, forked runs the same bug: {same}", file=sys.stderr)
    print(f"| form ({args.ranks} ranks) | as the user runs it, s | forked candidate, s | first error | "
          "forked = same bug |")
    print("|---|---|---|---|---|")
    for name, (fresh, forked, first, same) in rows.items():
        print(f"| {name} | {fresh:.2f} | {forked:.2f} | {first.describe()} | {same} |")
    print(f"\nmp.spawn / torchrun, forked candidates: {rows['mp.spawn'][1] / rows['torchrun'][1]:.2f}x")


if __name__ == "__main__":
    main()
