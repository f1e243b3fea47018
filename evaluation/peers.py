"""The general-purpose reducers shrinkgpu is compared with: install, invoke, collect.

Each peer lives in its own virtual environment under ``bench-envs/`` (git-ignored) and
is installed from PyPI with pip.  None of them needs torch: the shared oracle runs every
candidate with the project's Python.  How each is invoked, and where each keeps its
current best on disk (what is taken when the wall-clock cap kills it):

============== ==================================================== =========================================
tool           command line (WRAPPER = interesting.sh, the oracle)   best so far, on disk
============== ==================================================== =========================================
pysource-      ``pysource-minimize --file F --track MARKER -w --    none: F holds the candidate being tested,
minimize       WRAPPER F`` (the oracle prints MARKER when            so the oracle's record (``best.py``, the
               interesting; AST-level, one test at a time)           newest = smallest reproducing candidate)
picire         ``picire --input F --test WRAPPER --out DIR``         none until the end (``DIR/F``); the
               (line ddmin, sequential by default)                   oracle's record
lithium        ``lithium lithium_condition.py WRAPPER F`` (line      ``tmp*/N-interesting.py``, newest N
               chunks, one test at a time)                           (F itself holds the current candidate)
shrinkray      ``shrinkray --ui basic --no-llm --input-type arg      F: every adopted reduction is written back
               WRAPPER F`` (parallel by default: one test per core)   to it
============== ==================================================== =========================================
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from evaluation.common import BENCH_ENVS, REPO

LITHIUM_CONDITION = Path(__file__).resolve().parent / "lithium_condition.py"


@dataclass(frozen=True)
class Peer:
    name: str
    requirement: str  # what pip installs
    dist: str  # distribution name, for the version
    min_python: tuple[int, int] = (3, 8)

    @property
    def env(self) -> Path:
        return BENCH_ENVS / self.name

    @property
    def bin(self) -> Path:
        return self.env / "bin"

    def jobs(self) -> int:
        return (os.cpu_count() or 1) if self.name == "shrinkray" else 1

    def command(self, wrapper: Path, cand: Path, run_dir: Path) -> list[str]:
        from evaluation.oracle import MARKER

        if self.name == "pysource-minimize":
            return [str(self.bin / "pysource-minimize"), "--file", str(cand), "--track", MARKER, "-w", "--",
                    str(wrapper), str(cand)]
        if self.name == "picire":
            return [str(self.bin / "picire"), "--input", str(cand), "--test", str(wrapper),
                    "--out", str(run_dir / "picire-out")]
        if self.name == "lithium":
            return [str(self.bin / "lithium"), str(LITHIUM_CONDITION), str(wrapper), str(cand)]
        if self.name == "shrinkray":
            return [str(self.bin / "shrinkray"), "--ui", "basic", "--no-llm", "--input-type", "arg",
                    str(wrapper), str(cand)]
        raise ValueError(self.name)

    def env_vars(self) -> dict:
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env.pop("VIRTUAL_ENV", None)
        env.pop("PYTHONPATH", None)
        env["SHRINKRAY_LLM"] = "0"
        env["TERM"] = "dumb"
        env["COLUMNS"] = "120"
        return env

    def output(self, cand: Path, run_dir: Path, finished: bool, state: Path) -> tuple[str | None, str]:
        """(text, where it came from): the tool's result, or its best so far when capped."""
        if self.name == "picire":
            out = run_dir / "picire-out" / cand.name
            if finished and out.is_file():
                return out.read_text(encoding="utf-8", errors="replace"), "picire --out file"
        elif self.name == "pysource-minimize":
            if finished and cand.is_file():
                return cand.read_text(encoding="utf-8", errors="replace"), "file written by -w"
        elif self.name == "lithium":
            if finished and cand.is_file():
                return cand.read_text(encoding="utf-8", errors="replace"), "testcase file"
            found = []
            for p in run_dir.glob("tmp*/*-interesting*"):
                m = re.match(r"(\d+)-interesting", p.name)
                if m:
                    found.append((int(m.group(1)), p))
            if found:
                return max(found)[1].read_text(encoding="utf-8", errors="replace"), "newest tmp*/N-interesting file"
        elif self.name == "shrinkray":
            if cand.is_file():
                return cand.read_text(encoding="utf-8", errors="replace"), "file (reductions written back)"
        best = state / "best.py"
        if best.is_file():
            return best.read_text(encoding="utf-8", errors="replace"), "oracle's smallest reproducing candidate"
        return None, "nothing"


PEERS = {
    "pysource-minimize": Peer("pysource-minimize", "pysource-minimize[cli]", "pysource-minimize"),
    "picire": Peer("picire", "picire", "picire"),
    "lithium": Peer("lithium", "lithium-reducer", "lithium-reducer"),
    "shrinkray": Peer("shrinkray", "shrinkray", "shrinkray", (3, 12)),
}


def find_python(min_version: tuple[int, int], override: str | None = None) -> str | None:
    """An interpreter of at least ``min_version`` for a peer's venv."""
    cands = []
    if override:
        cands.append(override)
    if sys.version_info[:2] >= min_version:
        cands.append(getattr(sys, "_base_executable", None) or sys.executable)
    pyenv = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
    if pyenv.is_dir():
        for d in sorted(pyenv.iterdir(), reverse=True):
            cands.append(str(d / "bin" / "python"))
    for v in ("3.14", "3.13", "3.12", "3.11", "3.10"):
        w = shutil.which(f"python{v}")
        if w:
            cands.append(w)
    for c in cands:
        if not c or not Path(c).exists():
            continue
        try:
            out = subprocess.run([c, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                                 text=True, timeout=30)
            major, minor = map(int, out.stdout.split())
        except Exception:
            continue
        if (major, minor) >= min_version:
            return c
    return None


def version(peer: Peer) -> str | None:
    py = peer.bin / "python"
    if not py.exists():
        return None
    r = subprocess.run([str(py), "-c", f"import importlib.metadata as m; print(m.version({peer.dist!r}))"],
                       capture_output=True, text=True)
    return r.stdout.strip() or None


def ensure(peer: Peer, py312: str | None = None, log=print) -> tuple[bool, str]:
    """Install ``peer`` into its own venv unless it is there; (ok, message)."""
    exe = {"pysource-minimize": "pysource-minimize", "picire": "picire", "lithium": "lithium",
           "shrinkray": "shrinkray"}[peer.name]
    if (peer.bin / exe).exists() and version(peer):
        if peer.name != "pysource-minimize" or _has_cli_extra(peer):
            return True, f"{peer.dist} {version(peer)} (already installed in {peer.env.relative_to(REPO)})"
    py = find_python(peer.min_python, py312 if peer.min_python >= (3, 12) else None)
    if py is None:
        return False, f"no Python >= {'.'.join(map(str, peer.min_python))} found for {peer.name}"
    BENCH_ENVS.mkdir(exist_ok=True)
    log(f"installing {peer.requirement} into {peer.env} with {py}")
    r = subprocess.run([py, "-m", "venv", str(peer.env)], capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"venv failed: {r.stderr.strip()[-800:]}"
    r = subprocess.run([str(peer.bin / "python"), "-m", "pip", "install", "-q", peer.requirement],
                       capture_output=True, text=True)
    if r.returncode != 0 or not (peer.bin / exe).exists():
        return False, f"pip install {peer.requirement} failed: {(r.stderr or r.stdout).strip()[-1500:]}"
    return True, f"{peer.dist} {version(peer)} (installed now into {peer.env.relative_to(REPO)})"


def _has_cli_extra(peer: Peer) -> bool:
    r = subprocess.run([str(peer.bin / "python"), "-c", "import click, rich, black"], capture_output=True)
    return r.returncode == 0
