"""After a fix: does the bug still reproduce, around it and in the original flow?

The field guide's rule 7: verify the fix on the minimal case, its neighbours (boundary
values of the failing index, the short and last batch) and a representative part of the
original flow, in fresh processes, without diagnostic settings; and check that nothing
is silently skipped.  ``reduce`` leaves a case file beside its result
(``<stem>.min.json``) with the recorded signature and how the original ran; ``verify``
reads it and runs everything in fresh interpreters, in copies of the directories, with
``CUDA_LAUNCH_BLOCKING``/``AMD_SERIALIZE_KERNEL`` removed.

Each run is one of: *fixed* (runs without error), *rejected* (a ``ValueError`` or ``AssertionError``
raised by the program's own code, not by a torch call: a check such as
``validate_class_targets``),
*still failing* (the recorded bug: same class, message and operator) or *failing
differently* (another error at a torch call, a crash, a timeout).  Inputs known to be
bad (the minimal case, the invalid boundary values) pass when fixed or rejected; the
valid boundary values, the original script and ``--command`` pass only when fixed.
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shrinkgpu.ablation import CALL, DATA, PASSES, with_edit
from shrinkgpu.families import family_by_name
from shrinkgpu.inputs import read_source
from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.layout import case_file
from shrinkgpu.signature import Signature, Strictness, Target
from shrinkgpu.syntax.neighbours import INDEX_OPERATORS, index_neighbours, loader_neighbours
from shrinkgpu.worker import ExecutorFactory, Isolation, Observation, Runner, ScriptSpec, default_executor

DIAGNOSTIC_VARIABLES = ("CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL", "TORCH_USE_CUDA_DSA", "PYTORCH_USE_CUDA_DSA",
                        "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_NO_CUDA_MEMORY_CACHING")


class Outcome(str, enum.Enum):
    """How one check of ``verify`` came out."""

    FIXED = "fixed"  # it ran without the bug
    REJECTED = "rejected"  # an input check refused it (ValueError, AssertionError outside torch)
    STILL = "still failing"  # with the same bug
    DIFFERENT = "failing differently"

    __str__ = str.__str__

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)


FIXED, REJECTED, STILL, DIFFERENT = Outcome.FIXED, Outcome.REJECTED, Outcome.STILL, Outcome.DIFFERENT
# What a check raises when it rejects an input (shrinkgpu.checks: ValueError); anything
# else outside torch is a failure of the program, not a rejection.
REJECTIONS = ("ValueError", "AssertionError")
DEFAULT_TIMEOUT = 600.0


class CaseError(Exception):
    """The case file is missing or unreadable; the message says what to do."""


@dataclass(frozen=True)
class Check:
    name: str
    bad_input: bool  # the input is known to be bad: rejected counts as passing
    outcome: Outcome
    detail: str = ""
    # Shown, never deciding: the extracted call is the operator's contract, which a fix
    # in the user's code leaves failing and only a change in PyTorch itself would not.
    informative: bool = False

    @property
    def ok(self) -> bool:
        return self.informative or self.outcome == FIXED or (self.bad_input and self.outcome == REJECTED)

    @property
    def expectation(self) -> str:
        if self.informative:
            return "either (information)"
        return "fixed or rejected" if self.bad_input else "fixed"


@dataclass
class Verification:
    case: Path
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks) and not self.warnings

    def to_json(self) -> dict:
        return {
            "case": str(self.case),
            "ok": self.ok,
            "checks": [
                {"name": c.name, "expected": c.expectation, "outcome": c.outcome, "ok": c.ok, "detail": c.detail}
                for c in self.checks
            ],
            "warnings": self.warnings,
        }


def load_case(result_path: Path) -> dict:
    path = case_file(result_path)
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseError(
            f"{path}: no case file; `shrinkgpu reduce` writes one beside its result (verify takes the result, "
            "e.g. train.min.py)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CaseError(f"{path}: not a readable case file ({exc})") from None
    case["_dir"] = str(path.parent)
    return case


def target_of(case: dict) -> Target:
    recorded = Signature.from_json(case.get("final_signature") or case["signature"])
    pattern = re.compile(case["keep_error"]) if case.get("keep_error") else None
    family = family_by_name(case["family"]) if case.get("family") else None
    # After a fix the tensors at the operator may well differ: the bug is the class,
    # the message and the operator.
    return Target(recorded, pattern, Strictness.OPERATOR, family)


def classify(obs: Observation, target: Target) -> tuple[Outcome, str]:
    if obs.infra_error:
        return DIFFERENT, f"could not run: {obs.infra_error}"
    if obs.timed_out:
        return DIFFERENT, obs.describe()
    sig = obs.signature
    if sig is None:
        return FIXED, ""
    if target.matches(sig):
        return STILL, sig.headline
    if sig.op is None and any(sig.type.endswith(kind) for kind in REJECTIONS):
        at = f" at {sig.frame.file}:{sig.frame.line}" if sig.frame else ""
        return REJECTED, f"{sig.headline}{at}"
    return DIFFERENT, sig.headline + (f" at {sig.op.name}" if sig.op else "")


def clean_env(env: dict | None = None) -> dict:
    env = dict(os.environ if env is None else env)
    for name in DIAGNOSTIC_VARIABLES:
        env.pop(name, None)
    return env


def case_spec(case: dict, env: dict) -> tuple[ScriptSpec, str]:
    """How to run the minimal case a case file names, from the directory it is in, and
    its text; CaseError when it is not there any more."""
    written = Path(case["_dir"]) / case["case"]
    if written.is_dir():
        script, root = written / case["main"], written
    else:
        script, root = written, written.parent
    if not script.is_file():
        raise CaseError(f"{script}: the minimal case is not there any more")
    directory = written.is_dir()
    spec = ScriptSpec(script=script, args=tuple(case.get("args", ())), cwd=root, root=root, env=env,
                      argv0=case["main"] if directory else script.name,
                      module=case.get("module") if directory else None, launch=launch_of(case.get("nproc_per_node")))
    return spec, read_source(script)


def launch_of(nproc: int | None) -> Launch:
    """How a case file says its script runs: torchrun's ``nproc`` ranks, or one python."""
    return Launch(nproc=int(nproc), ranks=True) if nproc else PLAIN


def verify(
    result_path: Path,
    *,
    original: bool = True,
    command: str | None = None,
    count: str | None = None,
    timeout: float | None = None,
    nproc: int | None = None,
    on_check: Callable[[Check], None] | None = None,
    executors: ExecutorFactory = default_executor,
) -> Verification:
    """``nproc``: the ranks the minimal case and the original run as (default: what the
    case file says); ``executors``: where the runs run (this machine's by default)."""
    case = load_case(result_path)
    if nproc is not None:
        case["nproc_per_node"] = nproc
        if case.get("original"):
            case["original"]["nproc_per_node"] = nproc
    target = target_of(case)
    base = Path(case["_dir"])
    report = Verification(case=case_file(result_path))
    limit = timeout or float(case.get("timeout_fresh") or DEFAULT_TIMEOUT)
    env = clean_env()

    def add(check: Check) -> None:
        report.checks.append(check)
        if on_check is not None:
            on_check(check)

    # The minimal case and its neighbours, in a copy of the result's directory.
    spec, text = case_spec(case, env)
    sig = target.signature
    variants: list[tuple[str, str, bool]] = [("the minimal case", text, True)]
    if sig.op is not None:
        op = sig.op.name.rsplit(".", 1)[-1]
        size = _index_size(sig, op)
        if size is not None:
            ignore = _argument(sig, "ignore_index")
            for n in index_neighbours(text, op, size, int(ignore) if ignore is not None else None):
                variants.append((f"neighbour {n.name}", n.text, not n.valid))
    for n in loader_neighbours(text):
        variants.append((f"neighbour: {n.name}", n.text, True))
    extracted = case.get("extracted")
    with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
        runner.start()
        for name, source, bad in variants:
            obs = runner.run({spec.script_rel: source}, timeout=limit)
            outcome, detail = classify(obs, target)
            add(Check(name, bad, outcome, detail))
        if extracted:
            path = base / extracted
            if path.is_file():
                ext_spec = ScriptSpec(script=path, cwd=path.parent, root=path.parent, env=env, argv0=path.name)
                with Runner(ext_spec, isolation=Isolation.FRESH, executors=executors) as ext_runner:
                    ext_runner.start()
                    obs = ext_runner.run({ext_spec.script_rel: read_source(path)}, timeout=limit)
                outcome, detail = classify(obs, target)
                if outcome != FIXED:
                    detail = (detail + "; " if detail else "") + (
                        "the operator still refuses these arguments: expected after a fix in the code that made "
                        "them, fixed only by a change in PyTorch"
                    )
                add(Check("the extracted call", True, outcome, detail, informative=True))

    # The original flow.
    if original and case.get("original"):
        o = case["original"]
        script = (base / o["script"]).resolve()
        if script.is_file():
            cwd = (base / o.get("cwd", ".")).resolve()
            root = (base / o.get("root", ".")).resolve()
            ospec = ScriptSpec(script=script, args=tuple(o.get("args", ())), cwd=cwd, root=root, env=env,
                               argv0=o.get("argv0") or script.name, module=o.get("module"),
                               launch=launch_of(o.get("nproc_per_node")))
            with Runner(ospec, isolation=Isolation.FRESH, executors=executors) as runner:
                runner.start()
                obs = runner.run({ospec.script_rel: read_source(script)}, timeout=limit)
            outcome, detail = classify(obs, target)
            add(Check(f"the original script ({o['script']})", False, outcome, detail))
            if count is not None:
                before = _count(count, case.get("original_output", ""))
                after = _count(count, obs.stdout)
                if outcome == FIXED and before is not None and after is not None and after < before:
                    report.warnings.append(
                        f"the original now runs but counts fewer items than when it failed ({after} < {before}, "
                        f"by {count!r}): skipping bad items silently turns a crash into a wrong result"
                    )
                elif before is None:
                    report.warnings.append(f"{count!r} matched nothing in the original's recorded output")
        else:
            add(Check(f"the original script ({o['script']})", False, DIFFERENT, "not found any more"))
    if command:
        done = subprocess.run(command, shell=True, cwd=base, env=env, capture_output=True, text=True, timeout=limit)
        tail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
        add(Check(f"command: {command}", False, FIXED if done.returncode == 0 else DIFFERENT,
                  "" if done.returncode == 0 else f"exit {done.returncode}: {tail}"))
    return report


def _count(pattern: str, text: str) -> int | None:
    """Items counted in a script's output: the largest number the regex's first group
    captures, or else the number of matches; None when nothing matched."""
    regex = re.compile(pattern)
    matches = list(regex.finditer(text))
    if not matches:
        return None
    if regex.groups:
        numbers = [int(m.group(1)) for m in matches if m.group(1) and m.group(1).isdigit()]
        if numbers:
            return max(numbers)
    return len(matches)


def _argument(sig: Signature, name: str) -> str | None:
    for a in sig.op.arguments if sig.op else ():
        key, _, value = a.partition("=")
        if key == name:
            return value
    return None


def _index_size(sig: Signature, op: str) -> int | None:
    """How many entries the failing index indexes: classes, embeddings, or the size of
    the gathered dimension."""
    if op not in INDEX_OPERATORS or sig.op is None:
        return None
    shapes = {t.path: t.shape for t in sig.op.tensors}
    if op in ("cross_entropy", "nll_loss"):
        logits = shapes.get("args[0]") or shapes.get("kwargs['input']")
        return (logits[1] if len(logits) > 1 else logits[0]) if logits else None
    if op == "embedding":
        weight = shapes.get("args[1]") or shapes.get("kwargs['weight']")
        return weight[0] if weight else None
    source = shapes.get("args[0]") or shapes.get("kwargs['input']")
    dim = _argument(sig, "dim") or _argument(sig, "args[1]")
    try:
        return source[int(dim)] if source and dim is not None else None
    except (ValueError, IndexError):
        return None


TEST_TEMPLATE = '''"""Regression test written by shrinkgpu: it fails while the recorded bug still reproduces.

Case: {case}
Bug:  {headline}
It runs the minimal case in a fresh interpreter (a subprocess), without diagnostic
variables, and fails if its first error is the same bug (same class, message and
operator; with shrinkgpu installed, compared by its signature).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

CASE = (Path(__file__).parent / {case_rel!r}).resolve()
RECORDED = {recorded!r}
DIAGNOSTIC = {diagnostic!r}


def _first_error():
    env = {{k: v for k, v in os.environ.items() if k not in DIAGNOSTIC}}
    try:
        from shrinkgpu.reducer import ReduceConfig, run_observed
    except ImportError:
        done = subprocess.run([sys.executable, CASE.name], cwd=CASE.parent, env=env, capture_output=True,
                              text=True, timeout=600)
        last = [line for line in done.stderr.splitlines() if re.match(r"^[\\w.]+(Error|Exception)\\b", line)]
        return None if done.returncode == 0 or not last else last[-1]
    first = run_observed(ReduceConfig(script=CASE, cwd=CASE.parent, env=env, sync_launches="never"))
    return first.observation.signature


def _normalize(text):
    return re.sub(r"(?<![\\w.])[-+]?\\d+(?:\\.\\d+)?(?![\\w])", "<n>", text).strip()


def test_the_recorded_bug_no_longer_reproduces():
    seen = _first_error()
    if seen is None:
        return
    if isinstance(seen, str):  # without shrinkgpu: class and message from the traceback
        kind, _, message = seen.partition(": ")
        same = kind.rsplit(".", 1)[-1] == RECORDED["type"].rsplit(".", 1)[-1] and _normalize(message) == _normalize(
            RECORDED["message"].splitlines()[0] if RECORDED["message"] else "")
        assert not same, f"the bug still reproduces: {{seen}}"
        return
    from shrinkgpu.signature import Signature, Strictness

    assert not Signature.from_json(RECORDED).same_bug(seen, Strictness.OPERATOR), (
        f"the bug still reproduces: {{seen.headline}}"
    )
'''


VALID_TEMPLATE = '''

# The extracted call with its offending values made valid (the comparison that passed when
# the case was reduced: {change}): valid inputs must keep working, and return finite values.
VALID = {valid!r}
VALID_DIR = (Path(__file__).parent / {valid_dir!r}).resolve()


def test_the_call_with_valid_values_runs_and_returns_finite_values():
    env = {{k: v for k, v in os.environ.items() if k not in DIAGNOSTIC}}
    done = subprocess.run([sys.executable, "-c", VALID], cwd=VALID_DIR, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not all finite" not in done.stdout, done.stdout
'''


def _valid_neighbour(case: dict) -> tuple[str, str, Path] | None:
    """(change, text, directory) of the extracted call with valid values, when the
    case's comparisons found that it passes."""
    ablated = case.get("ablation") or {}
    extracted = Path(case["_dir"]) / case["extracted"] if case.get("extracted") else None
    if extracted is None or not extracted.is_file():
        return None
    for change in ablated.get("changes", ()):
        if (change.get("category"), change.get("subject"), change.get("outcome")) == (DATA, CALL, PASSES):
            lines = [ln[2:] for ln in change.get("edit", "").splitlines() if ln.startswith("+ ")]
            if lines:
                return change["change"], with_edit(read_source(extracted), lines), extracted.parent
    return None


def write_regression_test(result_path: Path, test_path: Path) -> Path:
    """A pytest file that runs the minimal case and fails while its bug reproduces; with
    a second test, when the comparisons found one, that the call with valid values runs."""
    case = load_case(result_path)
    script = case_spec(case, {})[0].script
    recorded = case.get("final_signature") or case["signature"]
    test_path = Path(test_path)
    test_path.parent.mkdir(parents=True, exist_ok=True)
    case_rel = os.path.relpath(script.resolve(), test_path.resolve().parent)
    test_path.write_text(
        TEST_TEMPLATE.format(
            case=case["case"], headline=Signature.from_json(recorded).headline, case_rel=case_rel,
            recorded={k: recorded[k] for k in ("type", "message", "normalized", "op", "frame", "kernel_assertion",
                                               "family", "crash_tail") if k in recorded},
            diagnostic=DIAGNOSTIC_VARIABLES,
        ) + _valid_test(case, test_path),
        encoding="utf-8",
    )
    return test_path


def _valid_test(case: dict, test_path: Path) -> str:
    found = _valid_neighbour(case)
    if found is None:
        return ""
    change, text, directory = found
    return VALID_TEMPLATE.format(change=change, valid=text,
                                 valid_dir=os.path.relpath(directory.resolve(), test_path.resolve().parent))


__all__ = ["CaseError", "Check", "Verification", "case_file", "case_spec", "clean_env", "load_case", "target_of",
           "verify", "write_regression_test"]
