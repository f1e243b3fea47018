"""Shared pieces of the evaluation runner: the machine, process trees, the oracle setup.

The cases themselves are in ``evaluation.catalog``."""

from __future__ import annotations

import ast
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_ENVS = REPO / "bench-envs"
PROJECT_PYTHON = Path(sys.executable)
ORACLE = Path(__file__).resolve().parent / "oracle.py"


# Targets of long cases (issue 21), from the original's fresh run time.
LONG_EXTRACT_TARGET = (1.5, 30.0)  # the extracted call within 1.5x the original + 30 s
LONG_RESULT_TARGET = (5.0, 120.0)  # a result at <= 30% of the tokens within 5x + 120 s
LONG_SHARE = 0.30


def long_timings(row: dict, started: float, original: float) -> dict:
    """When a long case's reduction reached what a user with a long job waits for, in
    seconds since ``shrinkgpu reduce`` started: the extracted call on disk, and the first
    accepted program at or under LONG_SHARE of the tokens (from its trace); with the
    targets that follow from the original's run time."""
    out: dict = {"original_seconds": original}
    extracted = (row.get("extracted") or {}).get("script")
    if extracted and Path(extracted).is_file():
        out["extracted_after"] = round(Path(extracted).stat().st_mtime - started, 1)
    before = row.get("tokens_before")
    for seconds, tokens in row.get("trace") or ():
        if before and tokens <= LONG_SHARE * before:
            out["small_after"] = seconds
            break
    out["extract_target"] = round(LONG_EXTRACT_TARGET[0] * original + LONG_EXTRACT_TARGET[1], 1)
    out["small_target"] = round(LONG_RESULT_TARGET[0] * original + LONG_RESULT_TARGET[1], 1)
    return out


def cuda_available() -> bool:
    try:
        out = subprocess.run(
            [str(PROJECT_PYTHON), "-c", "import torch; print(torch.cuda.is_available())"],
            capture_output=True, text=True, timeout=120,
        )
        return out.stdout.strip() == "True"
    except Exception:
        return False


# -- tokens and program files ---------------------------------------------------------------
def count_tokens(text: str) -> int:
    from shrinkgpu.syntax import count_tokens as _count

    return _count(text)


def imported_local_files(text: str, directory: Path, seen: set[str] | None = None, module_file: str = "") -> list[str]:
    """Local ``.py`` files of ``directory`` that ``text`` imports, transitively: modules
    (``heads.py``), packages (``tagger/__init__.py`` and each submodule named, as
    ``from tagger.data import X`` or ``from tagger import data`` reach them) and relative
    imports, resolved against the package of ``module_file`` (the importing file's path
    relative to ``directory``)."""
    seen = set() if seen is None else seen
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    dotted: list[list[str]] = []  # module paths, with the names imported from them
    here = Path(module_file).parent.parts if module_file else ()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted += [a.name.split(".") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level and node.level > len(here):
                continue  # beyond the top-level package: Python raises ImportError
            base = list(here[: len(here) - (node.level - 1)]) if node.level else []
            mod = base + (node.module.split(".") if node.module else [])
            dotted += [mod + [a.name] for a in node.names]  # the last part may be a name, not a module
    out = []

    def add(rel: str) -> None:
        if rel in seen or not (directory / rel).is_file():
            return
        seen.add(rel)
        out.append(rel)
        out.extend(imported_local_files((directory / rel).read_text(encoding="utf-8"), directory, seen, rel))

    for parts in dotted:
        for k in range(1, len(parts) + 1):
            prefix = "/".join(parts[:k])
            if (directory / prefix / "__init__.py").is_file():
                add(f"{prefix}/__init__.py")  # a package comes before a module of its name
            else:
                add(f"{prefix}.py")
    return out


def program_tokens(main_text: str, directory: Path, main_name: str) -> tuple[int, list[str]]:
    """Tokens of a program: the main script plus the unchanged local modules it imports."""
    extra = imported_local_files(main_text, directory, {main_name})
    total = count_tokens(main_text) + sum(count_tokens((directory / f).read_text(encoding="utf-8")) for f in extra)
    return total, extra


# -- processes ---------------------------------------------------------------------------
def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(proc: subprocess.Popen) -> None:
    """Stop ``proc``, its process group and every descendant (in any session)."""
    import psutil

    procs = []
    try:
        procs.append(psutil.Process(proc.pid))
    except psutil.Error:
        pass
    procs += _descendants(proc.pid)
    # Freeze first so nothing spawns or re-parents while we look again.
    for p in procs:
        try:
            p.send_signal(signal.SIGSTOP)
        except psutil.Error:
            pass
    procs += [p for p in _descendants(proc.pid) if p not in procs]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class Capped:
    returncode: int | None
    wall: float
    capped: bool


def run_capped(cmd: list[str], *, cwd: Path, cap: float, log: Path, env: dict | None = None,
               stdout: Path | None = None) -> Capped:
    """Run ``cmd`` in its own session; at ``cap`` seconds kill the whole tree."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out, open(stdout or os.devnull, "wb") as so:
        out.write(f"$ {' '.join(map(str, cmd))}\n".encode())
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(c) for c in cmd], cwd=cwd, stdin=subprocess.DEVNULL, stdout=so if stdout else out,
            stderr=out if stdout else subprocess.STDOUT, start_new_session=True, env=env,
        )
        try:
            rc = proc.wait(timeout=cap)
            wall = time.monotonic() - started
            # Anything it left behind goes too.
            for p in _descendants(proc.pid):
                try:
                    p.kill()
                except Exception:
                    pass
            return Capped(rc, wall, False)
        except subprocess.TimeoutExpired:
            wall = time.monotonic() - started
            kill_tree(proc)
            return Capped(None, wall, True)


# -- the shared oracle ---------------------------------------------------------------------
@dataclass
class OracleSetup:
    """The oracle's config for one case (or generated script), and the reference run."""

    name: str
    case_dir: Path
    script: str
    args: tuple[str, ...]
    keep_error: str
    reference: dict  # Signature JSON of the original's first error
    fresh_seconds: float  # the original's fresh run, as shrinkgpu run saw it
    timeout: float
    config_dir: Path
    extra_files: list[str] = field(default_factory=list)
    launch: tuple[str, ...] = ()  # how its processes start (``--nproc-per-node 2``)

    def config_path(self, state_dir: Path) -> Path:
        state_dir.mkdir(parents=True, exist_ok=True)
        p = state_dir / "oracle.json"
        p.write_text(json.dumps({
            "case_dir": str(self.case_dir),
            "script": self.script,
            "args": list(self.args),
            "keep_error": self.keep_error,
            "reference": self.reference,
            "python": str(PROJECT_PYTHON),
            "timeout": self.timeout,
            "state_dir": str(state_dir),
            "launch": list(self.launch),
        }, indent=2))
        return p

    def wrapper(self, state_dir: Path) -> Path:
        """An executable interestingness test: ``interesting.sh CANDIDATE``."""
        cfg = self.config_path(state_dir)
        sh = state_dir / "interesting.sh"
        sh.write_text(
            "#!/bin/sh\n"
            "# Shared oracle of the shrinkgpu evaluation (evaluation/oracle.py).\n"
            f'exec "{PROJECT_PYTHON}" "{ORACLE}" --config "{cfg}" "$@"\n'
        )
        sh.chmod(0o755)
        return sh


def calibrated_oracle_timeout(fresh_wall: float) -> float:
    """The same rule shrinkgpu uses for fresh runs: 10x the original, 5 s to 600 s."""
    return min(600.0, max(5.0, 10.0 * fresh_wall + 1.0))


def setup_oracle(name: str, directory: Path, script: str, args: tuple[str, ...], keep_error: str,
                 work: Path, launch: tuple[str, ...] = ()) -> OracleSetup:
    """Run the original once through the oracle's own runner; its signature is the reference.
    ``launch``: how its processes start (``--nproc-per-node 2``)."""
    import re

    from evaluation.oracle import observe

    text = (directory / script).read_text(encoding="utf-8")
    data = observe(directory, script, {script: text}, list(args), 600.0, str(PROJECT_PYTHON), launch=launch)
    sig = data.get("signature")
    if not sig:
        raise RuntimeError(f"{name}: the original did not fail under shrinkgpu run: {json.dumps(data)[:600]}")
    from shrinkgpu.signature import Signature

    s = Signature.from_json(sig)
    if not re.search(keep_error, s.keep_text()):
        raise RuntimeError(f"{name}: the original's first error does not match keep_error: {s.headline}")
    _, extra = program_tokens(text, directory, script)
    return OracleSetup(
        name=name, case_dir=directory, script=script, args=args, keep_error=keep_error, reference=sig,
        fresh_seconds=float(data.get("seconds") or 0.0),
        timeout=calibrated_oracle_timeout(float(data.get("seconds") or 0.0)),
        config_dir=work, extra_files=extra, launch=tuple(launch),
    )


def recheck(setup: OracleSetup, main_text: str, work: Path, runs: int, overlay: Path | None = None,
            free: list | tuple = ()) -> tuple[int, int]:
    """Run an output through the oracle (``--no-record``) ``runs`` times: (reproduced, runs).
    ``free``: the reduction's ``varying_dimensions`` (dicts of argument and dimension)."""
    work.mkdir(parents=True, exist_ok=True)
    cfg = setup.config_path(work / "recheck-state")
    cand = work / "recheck-candidate.py"
    cand.write_text(main_text, encoding="utf-8")
    ok = 0
    for _ in range(runs):
        cmd = [str(PROJECT_PYTHON), str(ORACLE), "--config", str(cfg), "--no-record"]
        if overlay is not None:
            cmd += ["--overlay", str(overlay)]
        if free:
            cmd += ["--free", ",".join(f"{d['argument']}:{d['dimension']}" for d in free)]
        cmd.append(str(cand))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=setup.timeout + 180)
        if r.returncode == 0:
            ok += 1
    return ok, runs


def read_calls(state_dir: Path) -> dict:
    """Oracle calls a tool made, by verdict, from the counter file."""
    log = state_dir / "calls.log"
    calls, verdicts, etypes, seconds = 0, {}, {}, 0.0
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) < 5:
                continue
            calls += 1
            verdicts[parts[1]] = verdicts.get(parts[1], 0) + 1
            if parts[2]:
                etypes[parts[2]] = etypes.get(parts[2], 0) + 1
            try:
                seconds += float(parts[4])
            except ValueError:
                pass
    return {"calls": calls, "verdicts": verdicts, "error_types": etypes, "oracle_seconds": round(seconds, 1)}


# -- the machine ---------------------------------------------------------------------------
ENVIRONMENT_PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "tensorboard", "pytorch-lightning",
                        "transformers", "tokenizers", "accelerate", "threadpoolctl")


def machine_info() -> dict:
    info: dict = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["ram_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    from importlib import metadata

    for pkg in ("torch", "shrinkgpu", "libcst"):
        try:
            info[f"{pkg}_version"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[f"{pkg}_version"] = None
    # What else the environment holds: the fork server's behaviour depends on it (numpy's
    # thread pools, the modules a framework imports).
    packages = {}
    for pkg in ENVIRONMENT_PACKAGES:
        try:
            packages[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    info["packages"] = packages
    try:
        rev = subprocess.run(["git", "rev-parse", "--short",
                              "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--",
                                "src"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        info["revision"] = rev + (" (src/ has uncommitted changes)" if dirty else "")
    except OSError:
        info["revision"] = None
    return info


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None
