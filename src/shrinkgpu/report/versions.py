"""What the report says about the environment: torch's own ``collect_env``, run beside
the reduction, this package's version and the user's code revision."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("shrinkgpu")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_revision(directory: Path) -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )
        if rev.returncode != 0:
            return "not in a git checkout"
        dirty = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )
        return rev.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


class CollectEnv:
    """``torch.utils.collect_env`` in a fresh process of the user's Python, started at the
    beginning of a reduction and read at its end, for the report's *Versions*."""

    def __init__(self, python: str, env: dict | None):
        env = {k: v for k, v in (env if env is not None else os.environ).items()
               if k not in ("CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL")}
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [python, "-c", "from torch.utils.collect_env import main; main()"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=env,
            )
        except OSError:
            self.proc = None

    def result(self, timeout: float = 120.0) -> str | None:
        if self.proc is None:
            return None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            return None
        text = out.replace("Collecting environment information...\n", "").strip()
        return text or None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
