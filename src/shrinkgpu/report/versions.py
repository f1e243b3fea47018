"""What the report says about the environment: torch's own ``collect_env``, run beside
the reduction, this package's version and the user's code revision."""

from __future__ import annotations

import os
import subprocess
import time
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


# How long a ``collect_env`` text is reused for the same interpreter and packages: a
# reduction after another (or a test suite's dozens) need not spend 3 s of CPU on it
# again; a driver or device change within that time is what it could miss.
COLLECT_ENV_REUSE_SECONDS = 3600.0
# What changes what ``collect_env`` reports besides the installed packages.
_DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
                     "PATH", "CONDA_PREFIX", "VIRTUAL_ENV")


def collect_env_cache_dir() -> Path:
    """Where the ``collect_env`` texts are kept (``$XDG_CACHE_HOME/shrinkgpu``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shrinkgpu" / "collect-env"


def _cache_key(python: str, env: dict) -> str | None:
    """The interpreter, the directories its packages are installed in (a ``pip install``
    changes their modification time) and the variables that select devices and
    libraries; None when the interpreter cannot be looked at."""
    import hashlib
    import json
    import sysconfig

    try:
        parts: list = [os.path.realpath(python), os.stat(python).st_mtime_ns]
        paths = sysconfig.get_paths()
        for where in sorted({p for p in (paths.get("purelib"), paths.get("platlib")) if p is not None}):
            parts.append([where, os.stat(where).st_mtime_ns if os.path.isdir(where) else None])
    except OSError:
        return None
    parts.append([env.get(name) for name in _DEVICE_VARIABLES])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


class CollectEnv:
    """``torch.utils.collect_env`` in a fresh process of the user's Python, started at the
    beginning of a reduction and read at its end, for the report's *Versions*; the text
    of an earlier reduction with the same interpreter, packages and device variables
    when it is less than an hour old (``COLLECT_ENV_REUSE_SECONDS``)."""

    def __init__(self, python: str, env: dict | None, cache_dir: Path | None = None):
        env = {k: v for k, v in (env if env is not None else os.environ).items()
               if k not in ("CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL")}
        self.proc: subprocess.Popen | None = None
        self.cached: str | None = None
        key = _cache_key(python, env)
        self.cache_file = (cache_dir or collect_env_cache_dir()) / f"{key}.txt" if key else None
        if self.cache_file is not None:
            try:
                if time.time() - self.cache_file.stat().st_mtime < COLLECT_ENV_REUSE_SECONDS:
                    self.cached = self.cache_file.read_text(encoding="utf-8") or None
            except (OSError, UnicodeDecodeError):
                self.cached = None
        if self.cached is not None:
            return
        try:
            self.proc = subprocess.Popen(
                [python, "-c", "from torch.utils.collect_env import main; main()"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=env,
            )
        except OSError:
            self.proc = None

    def result(self, timeout: float = 120.0) -> str | None:
        if self.cached is not None:
            return self.cached
        if self.proc is None:
            return None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            return None
        text = out.replace("Collecting environment information...\n", "").strip()
        if text and self.proc.returncode == 0 and self.cache_file is not None:
            try:  # written whole, then renamed: a reader never sees half a text
                self.cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.cache_file.with_name(f"{self.cache_file.name}.{os.getpid()}.tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, self.cache_file)
            except OSError:
                pass  # a cache that cannot be written costs the next reduction 3 s, nothing more
        return text or None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- ``shrinkgpu versions``: the case across versions of one package -----------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def versions_section(sentence: str, rows: list[list[str]]) -> str:
    """The block ``shrinkgpu versions`` adds under the report's *Versions*: its sentence,
    then a table whose first row is the header."""
    lines = [sentence[:1].upper() + sentence[1:] + ".", ""]
    if rows:
        lines.append("| " + " | ".join(_cell(c) for c in rows[0]) + " |")
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _markers(package: str) -> tuple[str, str]:
    return f"<!-- shrinkgpu versions {package}: begin -->", f"<!-- shrinkgpu versions {package}: end -->"


def write_versions_section(report: Path, package: str, block: str) -> None:
    """Put ``block`` into the report, in place of the one an earlier call wrote for the
    same package, else at the end of its *Versions* section (before the next heading),
    else at its end; written whole, then renamed."""
    begin, end = _markers(package)
    text = report.read_text(encoding="utf-8")
    marked = f"{begin}\n#### Across {package} versions (`shrinkgpu versions`)\n\n{block}\n{end}\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + marked + ("\n" + tail if tail else "")
    else:
        at = text.find("### Versions")
        following = text.find("\n### ", at + 1) if at >= 0 else -1
        if at >= 0 and following >= 0:
            text = text[: following + 1] + marked + "\n" + text[following + 1:]
        else:
            text = text.rstrip("\n") + "\n\n" + marked
    tmp = report.with_name(f"{report.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, report)
