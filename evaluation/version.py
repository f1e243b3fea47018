"""Which shrinkgpu a run of ``python -m evaluation.run`` calls: the installed one, or the
``src/`` of another commit, and whether the clock thresholds are pinned.

A change that must not change any result (a refactor), or "no result grows" after one
that should only add, is checked by reducing the same cases with two versions and
diffing what they wrote (``evaluation.diff_outputs``).  Both runs then need the same
test budget, the same hash seed and the thresholds that read the clock out of reach
(``evaluation.pinned``), or two loads take two paths and the diff shows noise::

    python -m evaluation.run --suite corpus --measure --max-tests 60 --jobs 1 --pinned \\
        --commit f024ba1 --workdir runs/before
    python -m evaluation.run --suite corpus --measure --max-tests 60 --jobs 1 --pinned \\
        --workdir runs/after
    python -m evaluation.diff_outputs runs/before runs/after --measure

Only the reducer changes between the two: the shared oracle that judges each result is
this checkout's in both runs.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from evaluation.common import PROJECT_PYTHON, REPO

# What makes two runs decide alike, beside the pinned thresholds: the reducer's own set
# order (PYTHONHASHSEED) and the candidates' (--hash-seed).
HASH_SEED = "0"


class VersionError(Exception):
    """The commit cannot be read, or its shrinkgpu is not the one that would run."""


@dataclass(frozen=True)
class Shrinkgpu:
    """How to call one version of shrinkgpu."""

    module: str = "shrinkgpu"
    env: dict[str, str] | None = None  # None: this process's environment
    flags: tuple[str, ...] = ()  # added to every ``reduce``
    commit: str | None = None  # the commit whose src/ runs; None: the installed one
    pinned: bool = False
    src: Path | None = None  # where the commit's src/ was written

    def command(self, *args: str) -> list[str]:
        return [str(PROJECT_PYTHON), "-m", self.module, *args]

    def help_command(self) -> list[str]:
        return [str(PROJECT_PYTHON), "-m", "shrinkgpu", "reduce", "--help"]

    def describe(self) -> dict:
        return {"commit": self.commit or "installed", "pinned": self.pinned,
                "src": str(self.src) if self.src else None}


INSTALLED = Shrinkgpu()


def archive_src(commit: str, into: Path) -> tuple[str, Path]:
    """``commit``'s src/ written under ``into``: (the commit's full hash, the src folder)."""
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        tar = subprocess.run(["git", "-C", str(REPO), "archive", sha, "src"], capture_output=True, check=True).stdout
    except FileNotFoundError as exc:
        raise VersionError("--commit needs git, and git is not on PATH") from exc
    except subprocess.CalledProcessError as exc:
        why = (exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or "").strip()
        raise VersionError(f"--commit {commit}: git could not read it from {REPO}: {why}") from exc
    dest = into / f"src-{sha[:12]}"
    if not (dest / "src" / "shrinkgpu").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(dest, filter="data")
    if not (dest / "src" / "shrinkgpu" / "__init__.py").is_file():
        raise VersionError(f"--commit {commit}: it has no src/shrinkgpu")
    return sha, dest / "src"


def resolve(commit: str | None, pinned: bool, work: Path) -> Shrinkgpu:
    """The shrinkgpu a run calls; checked to import from where it should."""
    if commit is None and not pinned:
        return INSTALLED
    paths, env, sha, src = [], dict(os.environ), None, None
    if commit is not None:
        sha, src = archive_src(commit, work)
        paths.append(str(src))
    if pinned:
        # ``-m evaluation.pinned`` from a case's folder: the repository's root on the path
        paths.append(str(REPO))
        env["PYTHONHASHSEED"] = HASH_SEED
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    how = Shrinkgpu(module="evaluation.pinned" if pinned else "shrinkgpu", env=env,
                    flags=("--hash-seed", HASH_SEED) if pinned else (), commit=sha, pinned=pinned, src=src)
    if src is not None:
        # An installed shrinkgpu found first (a .pth or an editable finder ahead of the
        # path) would make both runs the same version and every diff empty.
        found = subprocess.run([str(PROJECT_PYTHON), "-c", "import shrinkgpu; print(shrinkgpu.__file__)"],
                               capture_output=True, text=True, env=env, cwd=work, check=False).stdout.strip()
        if not found or not Path(found).resolve().is_relative_to(src.resolve()):
            raise VersionError(f"--commit {commit}: `import shrinkgpu` finds {found or 'nothing'}, "
                               f"not the commit's {src}")
    return how
