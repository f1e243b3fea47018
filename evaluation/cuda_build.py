"""The fork server on a CUDA build of torch against the CPU build: the same script reduced
by each, one after the other, candidates per second side by side.

    python -m evaluation.cuda_build --cuda-python /path/to/cuda-venv/bin/python
    python -m evaluation.cuda_build --cuda-python ... --src /tmp/old/src   # another version's code

A CUDA build's ``import torch`` maps the CUDA driver (``libcuda.so.1``, through cuBLASLt).
On a machine without NVIDIA's driver nothing is mapped, which is not what GPU users have:
the CUDA build runs with the stand-in driver of the tests (tests/data/standin_driver,
built here with the system's C compiler) on its loader path, as a machine with the
driver would have it.  Each interpreter must have shrinkgpu installed (``pip install -e
.``); ``--src`` puts another checkout's ``src/`` first on both interpreters' path.

Prints a markdown table: interpreter, torch, isolation, whether torch was preloaded,
candidates tested, search seconds, candidates per second, and the ratio CPU / CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "class_index" / "train.py"
KEEP = r"Target \d+ is out of bounds"


def standin_driver(into: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("no C compiler for the stand-in CUDA driver")
    source = REPO / "tests" / "data" / "standin_driver" / "libcuda.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(into / "libcuda.so.1"), str(source)], check=True)
    return into


def reduce_with(python: str, script: Path, keep: str, max_tests: int, env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="cuda-build-") as tmp:
        work = Path(tmp)
        shutil.copytree(script.parent, work, dirs_exist_ok=True)
        for stale in work.glob("*.min*"):  # an earlier result beside the fixture is not the script's
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        done = subprocess.run(
            [python, "-m", "shrinkgpu", "reduce", script.name, "-k", keep, "--json", "--max-tests", str(max_tests),
             "--no-ablate", "-j", "1"],
            cwd=work, env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            sys.exit(f"{python}: exit {done.returncode}\n{done.stderr[-3000:]}")
        data = json.loads(done.stdout)
        version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], env=env,
                                 capture_output=True, text=True, check=True).stdout.strip()
        data["torch"] = version
        return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda-python", required=True, help="an interpreter whose torch is a CUDA build")
    parser.add_argument("--cpu-python", default=sys.executable, help="an interpreter whose torch is a CPU build")
    parser.add_argument("--script", type=Path, default=FIXTURE)
    parser.add_argument("--keep-error", default=KEEP)
    parser.add_argument("--max-tests", type=int, default=300)
    parser.add_argument("--src", type=Path, help="another checkout's src/, first on the path of both")
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    if args.src is not None:
        base["PYTHONPATH"] = str(args.src.resolve())
    rows = []
    with tempfile.TemporaryDirectory(prefix="standin-driver-") as driver:
        cuda_env = {**base, "LD_LIBRARY_PATH": str(standin_driver(Path(driver)))}
        for name, python, env in (("CPU build", args.cpu_python, base), ("CUDA build, stand-in driver",
                                                                         args.cuda_python, cuda_env)):
            data = reduce_with(python, args.script.resolve(), args.keep_error, args.max_tests, env)
            rows.append((name, data))
            print(f"{name}: {data['candidates_tested']} candidates, {data['candidates_per_second']} /s",
                  file=sys.stderr)
    print("| torch | isolation | torch preloaded | modules preloaded | candidates | search s | candidates/s |")
    print("|---|---|---|---|---|---|---|")
    for name, d in rows:
        search = d["candidates_tested"] / d["candidates_per_second"] if d.get("candidates_per_second") else 0.0
        print(f"| {d['torch']} ({name}) | {d['isolation']} | {d.get('torch_preloaded')} | {d['preloaded_modules']} "
              f"| {d['candidates_tested']} | {search:.1f} | {d['candidates_per_second']} |")
    cpu, cuda = rows[0][1]["candidates_per_second"], rows[1][1]["candidates_per_second"]
    if cpu and cuda:
        print(f"\nCPU / CUDA candidates per second: {cpu / cuda:.2f}x")


if __name__ == "__main__":
    main()
