"""The same script and options give the same program on an idle machine and a busy one
(issue 58): each case reduced twice, once alone and once beside a CPU burner that takes
every core, and the two programs compared byte for byte.

    python -m evaluation.under_load --suite fixtures,long --measure     # the measurement
    python -m evaluation.under_load --cases class_index --max-tests 40  # a smoke run

Both reductions run the same command from a fresh copy of the case's folder, with one
hash seed (``--hash-seed 0``, ``PYTHONHASHSEED=0``) and no ``--max-time`` (a time limit
cuts a reduction where the machine's speed puts it; that is not what is compared).  The
burner is one busy loop per core (``os.cpu_count()``, or ``--burners``), started before
the loaded reduction and stopped after it; each loop also ends by itself after
``--burn-max`` seconds, so none outlives the benchmark.

Prints a markdown table: the tokens of each result, whether the two programs are the
same, where each search started, each wall time; writes ``results.json`` and the logs
under ``bench-envs/runs/<timestamp>-under-load/`` (``--workdir``).  Heavy: run it on an
otherwise idle machine (the burner is the only load it should see).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from evaluation import catalog, common, version
from evaluation.check import launcher_args
from evaluation.common import BENCH_ENVS
from evaluation.overrun import fresh_copy, log

CAP = 7200.0  # seconds a reduction may take before it is killed (a safety, never reached)
BURN_MAX = 4 * 3600.0
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


class Burner:
    """``count`` busy loops, each in a session of its own, each ending by itself after
    ``seconds``; ``stop()`` ends them sooner."""

    def __init__(self, count: int, seconds: float):
        self.procs = [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)], start_new_session=True,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                      for _ in range(count)]

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()

    def __enter__(self) -> "Burner":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def result_files(summary: dict) -> dict[str, str]:
    """The program a reduction wrote, by path relative to the result (the file, or the
    files of the directory of a result of several)."""
    output = Path(summary["output"])
    if output.is_dir():
        return {str(p.relative_to(output)): p.read_text(encoding="utf-8") for p in sorted(output.rglob("*.py"))}
    return {output.name: output.read_text(encoding="utf-8")}


def reduce_once(case: catalog.Case, work: Path, launch: list[str], jobs: int, max_tests: int | None) -> dict:
    folder = fresh_copy(case, work / "case")
    how = version.INSTALLED
    cmd = how.command("reduce", "--keep-error", case.keep_error, "--jobs", str(jobs), "--hash-seed", version.HASH_SEED,
                      "--json", "-q", *launch, *(["--max-tests", str(max_tests)] if max_tests else []), case.script)
    if case.args:
        cmd += ["--", *case.args]
    load = os.getloadavg()[0]
    res = common.run_capped(cmd, cwd=folder, cap=CAP, log=work / "log.txt", stdout=work / "summary.json",
                            env={**os.environ, "PYTHONHASHSEED": version.HASH_SEED})
    try:
        summary = json.loads((work / "summary.json").read_text())
        files = result_files(summary)
    except (OSError, json.JSONDecodeError, KeyError):
        return {"wall": round(res.wall, 1), "load": round(load, 1), "error": f"no result (exit {res.returncode})",
                "files": None, "tokens": None, "start": None}
    return {"wall": round(res.wall, 1), "load": round(load, 1), "files": files, "tokens": summary.get("tokens_after"),
            "start": (summary.get("start") or {}).get("from"), "stop": summary.get("stop_reason"),
            "candidates": summary.get("candidates_tested"), "error": None}


def table(rows: list[dict]) -> str:
    lines = ["| case | tokens alone | tokens loaded | same program | start alone / loaded | wall alone s | "
             "wall loaded s | load before (1 min) |", "|---|---:|---:|---|---|---:|---:|---|"]
    for r in rows:
        a, b = r["alone"], r["loaded"]
        same = "error" if a["files"] is None or b["files"] is None else "yes" if r["same"] else "NO"
        lines.append(f"| {r['case']} | {a['tokens']} | {b['tokens']} | {same} | {a['start']} / {b['start']} | "
                     f"{a['wall']:.1f} | {b['wall']:.1f} | {a['load']} / {b['load']} |")
    same = sum(1 for r in rows if r["same"])
    lines += ["", f"the same program in {same} of {len(rows)} case(s)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.under_load", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--suite", default=None, help="comma-separated suites (fixtures,long for the measurement)")
    ap.add_argument("--tags", default=None)
    ap.add_argument("--cases", default=None, help="comma-separated case names")
    ap.add_argument("--measure", action="store_true", help="held-out cases run too (a measurement)")
    ap.add_argument("--max-tests", type=int, default=None, help="shrinkgpu --max-tests (both runs alike)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="busy loops beside the loaded run")
    ap.add_argument("--burn-max", type=float, default=BURN_MAX, help="seconds after which each loop ends by itself")
    ap.add_argument("--workdir", type=Path, default=None)
    ns = ap.parse_args(argv)
    try:
        cases, held = catalog.select(suites=ns.suite, tags=ns.tags, names=ns.cases, measure=ns.measure)
    except catalog.HeldOut as exc:
        ap.error(str(exc))
    if held:
        log(f"left out (held out; --measure runs them): {', '.join(c.name for c in held)}")
    work = ns.workdir or BENCH_ENVS / "runs" / (time.strftime("%Y%m%d-%H%M%S") + "-under-load")
    work.mkdir(parents=True, exist_ok=True)
    help_text = subprocess.run(version.INSTALLED.help_command(), capture_output=True, text=True).stdout
    rows = []
    for case in cases:
        launch = launcher_args(case, help_text)
        if launch is None or (case.device == "cuda" and not common.cuda_available()):
            log(f"{case.name}: skipped")
            continue
        log(f"{case.name}: alone")
        alone = reduce_once(case, work / case.name / "alone", launch, ns.jobs, ns.max_tests)
        log(f"{case.name}: beside {ns.burners} busy loop(s)")
        with Burner(ns.burners, ns.burn_max):
            loaded = reduce_once(case, work / case.name / "loaded", launch, ns.jobs, ns.max_tests)
        same = alone["files"] is not None and alone["files"] == loaded["files"]
        rows.append({"case": case.name, "alone": alone, "loaded": loaded, "same": same})
        log(f"  {alone['tokens']} / {loaded['tokens']} tokens, same program: {same}")
    (work / "results.json").write_text(json.dumps({"machine": common.machine_info(), "rows": rows,
                                                   "command": "python -m evaluation.under_load "
                                                              + " ".join(argv or sys.argv[1:])}, indent=2))
    print(table(rows))
    return 0 if rows and all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
