"""How candidates scale with workers: on this machine's fork server and on a two-node Ray
cluster started here (issue 47's benchmark).

    python -m evaluation.scale_out                       # every part, a markdown table each
    python -m evaluation.scale_out --parts throughput --workers 1,2,4,8 --sleep 1
    python -m evaluation.scale_out --parts overhead,reduction

* ``throughput``: candidates that wait rather than compute (``time.sleep(S)``, as a GPU
  job waits on its device, then the failure), ``4 x W`` of them with ``W`` workers, on
  each executor; candidates per second, the speed-up over one worker of the same
  executor, and that speed-up over ``W`` (1.0 is linear).
* ``overhead``: a candidate that does nothing but fail, one worker, one after the other:
  the median wall per candidate locally and on Ray, and their difference (what a
  candidate costs on Ray beyond the local fork server).
* ``same``: fixtures reduced on this machine (``-j 2``) and on the cluster (2 Ray workers),
  with a test budget, a hash seed and the clock thresholds pinned (``evaluation.pinned``):
  whether the two write the same program.
* ``reduction``: the whole ``shrinkgpu reduce`` of a waiting script (each run calls a
  library on the path that waits, as a device does, in a call the error needs) with
  ``-j 1`` and ``-j 8`` on this machine, and with 8 Ray workers on the cluster; seconds,
  candidates, tokens, and whether the three results are the same program.

The cluster is ``ray.cluster_utils.Cluster``: a head and one more node, each with
``W / 2`` CPUs (no GPUs: a worker then takes a CPU), on the loopback address only, and
stopped at the end.  Every figure is measured in this run, on this machine; the load
average at the start and end is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from shrinkgpu.worker import Isolation, Runner, ScriptSpec

LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # (tests/worker/test_ray_actors.py says why)
# What a real candidate's fork server holds (its script imports torch): a worker without
# it would pay torch's import in every candidate, which no reduction does.
PRELOAD = ("torch",)
# the pinned CLI as a file: the reductions run from the case's copy, where the
# evaluation package is not importable
PINNED = str(Path(__file__).with_name("pinned.py"))


def waiting_script(seconds: float) -> str:
    return f"import time\ntime.sleep({seconds})\nraise IndexError('index 4 is out of bounds')\n"


def walls_of(runner: Runner, script: str, count: int, at_once: int) -> tuple[float, list]:
    """Seconds for ``count`` runs of ``script``, ``at_once`` in flight, and their observations."""
    programs = [({"cand.py": script}, {}) for _ in range(count)]
    started = time.perf_counter()
    seen = runner.run_all(programs, timeout=120, at_once=at_once)
    return time.perf_counter() - started, seen


class Executors:
    """The two ways to run: this machine's fork server, and a Ray cluster of two nodes."""

    def __init__(self, directory: Path, workers: int):
        self.directory = directory
        self.workers = workers
        self.cluster = None
        self.ray_factory = None

    def spec(self) -> ScriptSpec:
        return ScriptSpec(script=self.directory / "cand.py", cwd=self.directory, root=self.directory,
                          argv0="cand.py", env={**os.environ})

    def local(self) -> Runner:
        runner = Runner(self.spec(), isolation=Isolation.FORK, capture_ops=False)
        runner.start(PRELOAD)
        return runner

    def ray(self, workers: int) -> Runner:
        from shrinkgpu.worker import RayCluster, RayOptions

        self._cluster()
        self.ray_factory = RayCluster(RayOptions(workers=workers))
        runner = Runner(self.spec(), isolation=Isolation.FORK, capture_ops=False, executors=self.ray_factory)
        report = runner.start(PRELOAD, required=True)
        if runner.isolation is not Isolation.FORK:
            raise RuntimeError(f"the Ray workers did not start: {report.note}")
        return runner

    def _cluster(self) -> None:
        if self.cluster is not None:
            return
        os.environ[LOOPBACK_ONLY] = "0"
        import ray
        from ray.cluster_utils import Cluster

        half = max(1, self.workers // 2)
        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": half, "include_dashboard": False})
        self.cluster.add_node(num_cpus=half)
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.cluster.wait_for_nodes()

    def close(self) -> None:
        if self.cluster is not None:
            import ray

            ray.shutdown()
            self.cluster.shutdown()
            self.cluster = None


def throughput(execs: Executors, counts: list[int], sleep: float) -> list[dict]:
    rows = []
    for kind in ("local", "ray"):
        base = None
        for w in counts:
            runner = execs.local() if kind == "local" else execs.ray(w)
            try:
                walls_of(runner, waiting_script(0.0), w, w)  # every worker warm
                wall, seen = walls_of(runner, waiting_script(sleep), 4 * w, w)
                placement = runner.placement()
            finally:
                runner.close()
            failed = sum(1 for o in seen if o.signature is not None and o.signature.type == "IndexError")
            rate = 4 * w / wall
            base = rate if w == counts[0] else base
            speedup = rate / base * counts[0]
            rows.append({"executor": kind, "workers": w, "nodes": len(placement.nodes), "candidates": 4 * w,
                         "failed_as_written": failed, "seconds": round(wall, 2),
                         "per_second": round(rate, 3), "speedup": round(speedup, 2),
                         "of_linear": round(speedup / w, 2)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def overhead(execs: Executors, runs: int) -> dict:
    out = {}
    for kind in ("local", "ray"):
        runner = execs.local() if kind == "local" else execs.ray(1)
        try:
            walls_of(runner, waiting_script(0.0), 5, 1)
            walls = []
            for _ in range(runs):
                wall, _seen = walls_of(runner, waiting_script(0.0), 1, 1)
                walls.append(wall)
        finally:
            runner.close()
        out[kind] = statistics.median(walls)
    return {"runs": runs, "local_ms": round(out["local"] * 1000, 1), "ray_ms": round(out["ray"] * 1000, 1),
            "ray_extra_ms": round((out["ray"] - out["local"]) * 1000, 1)}


# A script whose runs wait on a "device": the library (outside the script's directory, as
# an installed one is) sleeps in each call, and the error needs what the call returns.
DEVICE = textwrap.dedent("""\
    import time
    import torch

    def step(n):
        time.sleep(1.0)  # the device working
        return torch.zeros(2 * n)
    """)
WAITING = textwrap.dedent("""\
    import argparse
    import json
    import math
    import torch
    from fakedevice import step

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args([])
    print("starting", vars(args))
    sizes = [3, 5, 8]
    total = 0
    for s in sizes:
        total += s
    names = {"a": 1, "b": 2, "c": 3}
    inverse = {v: k for k, v in names.items()}
    schedule = [args.lr * math.cos(i / 10) for i in range(10)]
    print("schedule", schedule[:3], inverse)
    log = []
    def note(kind, value):
        log.append((kind, value))
        print(kind, value)
    warm = step(1)
    note("warm", tuple(warm.shape))
    history = []
    for epoch in range(args.epochs):
        out = step(4)
        history.append(float(out.sum()))
        note("epoch", history[-1])
    config = {"lr": args.lr, "depth": 3, "name": "probe"}
    scale = config["lr"] * 10
    summary = json.dumps({"history": history, "total": total})
    note("summary", summary)
    x = step(3)
    mask = x > -1
    kept = x[mask]
    note("kept", (kept.numel(), scale, total))
    y = kept[7]
    note("never", y)
    """)


def reduction(execs: Executors, work: Path) -> list[dict]:
    lib = work / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "fakedevice.py").write_text(DEVICE)
    rows, texts = [], {}
    env = {**os.environ, "PYTHONPATH": str(lib), "PYTHONHASHSEED": "0"}
    for label, extra in (("local -j 1", ["-j", "1"]), ("local -j 8", ["-j", "8"]),
                         ("ray, 8 workers", ["--executor", "ray", "--workers", "8"])):
        case = work / label.replace(" ", "_").replace(",", "")
        shutil.rmtree(case, ignore_errors=True)
        case.mkdir()
        (case / "train.py").write_text(WAITING)
        cmd = [sys.executable, PINNED, "reduce", "-k", "index 7 is out of bounds", "--json",
               "-q", "--hash-seed", "0", "--no-ablate", *extra, "train.py"]
        if "ray" in label:
            execs._cluster()
            cmd[cmd.index("--executor"):cmd.index("--executor")] = ["--address", execs.cluster.address]
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=case, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=3600)
        wall = time.perf_counter() - started
        data = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {"error": done.stderr[-800:]}
        result = case / "train.min.py"
        texts[label] = result.read_text() if result.exists() else None
        rows.append({"run": label, "seconds": round(wall, 1), "candidates": data.get("candidates_tested"),
                     "tokens": f"{data.get('tokens_before')} -> {data.get('tokens_after')}",
                     "per_second": data.get("candidates_per_second"),
                     "unused_share": (data.get("speculation") or {}).get("share"),
                     "workers": data.get("workers"), "nodes": len(data.get("nodes") or []),
                     "error": data.get("error")})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    first = texts["local -j 1"]
    for row in rows:
        row["same_program_as_j1"] = texts[row["run"]] == first and first is not None
    return rows


def same(execs: Executors, work: Path, names: list[str], max_tests: int) -> list[dict]:
    from evaluation import catalog

    execs._cluster()
    rows = []
    for name in names:
        case = catalog.load(name)
        texts, row = {}, {"fixture": name}
        for label, extra in (("local", []), ("ray", ["--executor", "ray", "--address", execs.cluster.address,
                                                     "--workers", "2"])):
            copy = work / f"{name}-{label}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(case.dir, copy, ignore=shutil.ignore_patterns("ideal_cut.py", "case.toml", "NOTES.md"))
            cmd = [sys.executable, PINNED, "reduce", "-k", case.keep_error, "--json", "-q", "-j",
                   "2", "--max-tests", str(max_tests), "--hash-seed", "0", "--no-ablate", *extra, case.script,
                   *(["--", *case.args] if case.args else [])]
            started = time.perf_counter()
            done = subprocess.run(cmd, cwd=copy, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONHASHSEED": "0"}, timeout=3600)
            data = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
            out = Path(data["output"]) if data.get("output") else None
            texts[label] = out.read_text() if out is not None and out.is_file() else None
            row[f"{label}_tokens"] = f"{data.get('tokens_before')} -> {data.get('tokens_after')}"
            row[f"{label}_seconds"] = round(time.perf_counter() - started, 1)
            if label == "ray":
                row["ray_nodes"] = len(data.get("nodes") or [])
        row["same_program"] = texts["local"] is not None and texts["local"] == texts["ray"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.scale_out", description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="throughput,overhead,same,reduction")
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--sleep", type=float, default=1.0, help="seconds each waiting candidate waits")
    ap.add_argument("--overhead-runs", type=int, default=40)
    ap.add_argument("--fixtures", default="view_noncontig,dtype_mismatch", help="for --parts same")
    ap.add_argument("--max-tests", type=int, default=120, help="for --parts same")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    counts = [int(w) for w in args.workers.split(",")]
    directory = Path(tempfile.mkdtemp(prefix="scale-out-"))
    (directory / "cand.py").write_text(waiting_script(0.0))
    execs = Executors(directory, max(counts))
    print(f"load average at the start: {os.getloadavg()}; CPUs: {os.cpu_count()}")
    try:
        if "throughput" in parts:
            print(f"\n### Throughput: candidates that wait {args.sleep:g} s\n")
            print(table(throughput(execs, counts, args.sleep)))
        if "overhead" in parts:
            print("\n### The cost of a candidate on Ray beyond the local fork server\n")
            print(table([overhead(execs, args.overhead_runs)]))
        if "same" in parts:
            print("\n### The same fixtures on this machine and on the cluster\n")
            print(table(same(execs, directory / "same", args.fixtures.split(","), args.max_tests)))
        if "reduction" in parts:
            print("\n### A whole reduction of a waiting script\n")
            print(table(reduction(execs, directory / "reduction")))
    finally:
        execs.close()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\nload average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
