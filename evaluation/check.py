"""Does each case still fail as its case.toml says?  Runs the script (and, with
``--ideal``, its ``ideal_cut.py``) once with ``shrinkgpu run --json`` and compares the
first error with ``[expect]``: the class, the operator, and ``keep_error`` against the
error's text.

    python -m evaluation.check yaml_har pkg_tagger       # named cases
    python -m evaluation.check --suite fresh --ideal     # a suite, with the ideal cuts
    python -m evaluation.check --tags compile --json     # one JSON line per run

The runs go through shrinkgpu's own probe, in a fresh interpreter and a copy of the
case's folder (nothing is written into it), so what is checked is what a reduction
will see.  An empty ``exception`` or ``operator`` in case.toml is not compared.  For
an ideal cut it also says whether its first error is the same bug as the script's by
the strict rule (class, message, operator, dtype, shape and stride at the operator);
that is reported, not required: a cut of a torch.compile failure is often the same
error in another graph.

A case that needs a device this machine lacks, or a launcher this shrinkgpu does not
have, is skipped and says why.  Exits 1 when any run does not match.  Checking is not
tuning: held-out cases are checked like the others.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from evaluation import catalog
from evaluation.catalog import Case

DEFAULT_TIMEOUT = 900.0  # the long cases fail after 60-150 s on a 2-core machine


@dataclass
class Checked:
    case: str
    which: str  # the script's file name, or "ideal_cut.py"
    ok: bool
    seconds: float
    exception: str | None = None
    operator: str | None = None
    headline: str | None = None
    problems: tuple[str, ...] = ()
    same_bug_as_script: bool | None = None
    skipped: str | None = None

    def line(self) -> str:
        if self.skipped:
            return f"SKIP  {self.case}/{self.which}: {self.skipped}"
        mark = "ok  " if self.ok else "BAD "
        text = f"{mark}  {self.case}/{self.which} ({self.seconds:.1f} s): {self.exception} at {self.operator or '-'}"
        if self.same_bug_as_script is not None:
            text += f"; same bug as the script: {'yes' if self.same_bug_as_script else 'no'}"
        if self.problems:
            text += "\n      " + "\n      ".join(self.problems)
        return text


@functools.cache
def _run_options() -> str:
    return subprocess.run([sys.executable, "-m", "shrinkgpu", "run", "--help"], capture_output=True,
                          text=True, timeout=120).stdout


def launcher_args(case: Case, help_text: str) -> list[str] | None:
    """What the command line needs for a case launched as torchrun would launch it, or None
    when this shrinkgpu has no such option (issue 46 adds ``--nproc-per-node``)."""
    if not case.nproc_per_node:
        return []
    if "--nproc-per-node" not in help_text:
        return None
    return ["--nproc-per-node", str(case.nproc_per_node)]


@functools.cache
def _has_cuda() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    return probe.stdout.strip() == "True"


def skip_reason(case: Case) -> str | None:
    if case.device != "cpu" and not _has_cuda():
        return f"needs a {case.device} device; this machine has none"
    if launcher_args(case, _run_options()) is None:
        return f"launched with {case.nproc_per_node} ranks; this shrinkgpu has no --nproc-per-node"
    return None


def observe(case: Case, script: str, args: tuple[str, ...], timeout: float) -> tuple[dict | None, float, str]:
    """``shrinkgpu run --json`` of ``script`` in the case's folder: (its JSON, seconds, stderr tail)."""
    cmd = [sys.executable, "-m", "shrinkgpu", "run", "--json", "--timeout", f"{timeout:g}",
           *launcher_args(case, _run_options()), script]
    if args:
        cmd += ["--", *args]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=case.dir, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout + 300)
    seconds = time.monotonic() - started
    try:
        return json.loads(proc.stdout), seconds, proc.stderr[-2000:]
    except json.JSONDecodeError:
        return None, seconds, (proc.stdout + proc.stderr)[-2000:]


def compare(case: Case, which: str, data: dict | None, seconds: float, tail: str) -> Checked:
    from shrinkgpu.signature import Signature

    sig = (data or {}).get("signature")
    if not sig:
        why = (data or {}).get("error") or tail.strip().splitlines()[-1:] or ["no output"]
        return Checked(case.name, which, False, seconds,
                       problems=(f"no first error: {why if isinstance(why, str) else why[0]}",))
    s = Signature.from_json(sig)
    op = s.op.name if s.op else None
    problems = []
    if case.exception and s.type != case.exception:
        problems.append(f"class {s.type}, case.toml expects {case.exception}")
    if case.operator and op != case.operator:
        problems.append(f"operator {op}, case.toml expects {case.operator}")
    if not re.search(case.keep_error, s.keep_text()):
        problems.append(f"keep_error {case.keep_error!r} does not match: {s.headline}")
    return Checked(case.name, which, not problems, seconds, s.type, op, s.headline, tuple(problems))


def check(case: Case, ideal: bool, timeout: float) -> list[Checked]:
    why = skip_reason(case)
    if why:
        return [Checked(case.name, case.script, True, 0.0, skipped=why)]
    data, seconds, tail = observe(case, case.script, case.args, timeout)
    out = [compare(case, case.script, data, seconds, tail)]
    if ideal and case.ideal is not None:
        idata, iseconds, itail = observe(case, case.ideal.name, (), timeout)
        checked = compare(case, case.ideal.name, idata, iseconds, itail)
        if (data or {}).get("signature") and (idata or {}).get("signature"):
            from shrinkgpu.signature import Signature

            checked.same_bug_as_script = Signature.from_json(data["signature"]).same_bug(
                Signature.from_json(idata["signature"]))
        out.append(checked)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.check", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("cases", nargs="*", help="case names (default: the cases --suite/--tags select)")
    ap.add_argument("--suite", default=None, help="comma-separated suites")
    ap.add_argument("--tags", default=None, help="comma-separated tags: cases with any of them")
    ap.add_argument("--exclude-tags", default=None, help="comma-separated tags: cases with none of them")
    ap.add_argument("--ideal", action="store_true", help="also check each case's ideal_cut.py")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per run")
    ap.add_argument("--json", action="store_true", help="one JSON object per run instead of a line")
    ns = ap.parse_args(argv)
    if not (ns.cases or ns.suite or ns.tags or ns.exclude_tags):
        ap.error("name cases, or select them with --suite / --tags / --exclude-tags")
    chosen, _ = catalog.select(suites=ns.suite, tags=ns.tags, exclude_tags=ns.exclude_tags,
                               names=",".join(ns.cases) or None, measure=True)
    bad = 0
    for case in chosen:
        for checked in check(case, ns.ideal, ns.timeout):
            bad += not checked.ok
            print(json.dumps(asdict(checked)) if ns.json else checked.line(), flush=True)
    if not ns.json:
        print(f"{len(chosen)} case(s), {bad} run(s) not as case.toml says")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
