"""Environments that differ from the user's in one package version: overlays.

An overlay is a directory that holds only what differs: the requested version and
whatever it needs that the user's environment does not already have at the version the
resolution chose.  A run in it is the user's own interpreter with the overlay first on
``PYTHONPATH``: ahead of the user's site-packages, so ``import numpy`` and
``importlib.metadata.version("numpy")`` find the overlay's copy, and every other
package is the user's own, the very same files.  Nothing is reinstalled that is the
same, and nothing of the user's environment is touched.

Building one (``build``):

1. *Resolve* with uv from the user's pip indexes: the requested pin, plus the installed
   packages that depend on it (``torchvision`` when ``torch`` changes: they may have to
   change with it), with every installed version as a preference (uv prefers the pins of
   an existing output file).  What comes out at another version than the user's, beside
   the request, is what had to change, and is said.  A resolution that fails with the
   dependents is tried without them (they then stay the user's, and that is said).
2. *Install* exactly those pins, without their dependencies (the resolution chose
   them), with ``uv pip install --target`` into a directory beside the cache's.
3. *Check* in a child interpreter that each overlaid package resolves to the overlay's
   copy at the pinned version: a user's copy that leaks through fails the build.

uv (not pip) builds them: it resolves and installs in a fraction of pip's time and
shares one download cache between environments, where pip would copy a CUDA build of
torch (several GB) again for every environment.  Nothing is built from source
(``NO_BUILD``).

The cache (``Cache``): ``$SHRINKGPU_VERSIONS_CACHE``, else ``shrinkgpu/versions`` in
``$XDG_CACHE_HOME`` (``~/.cache``); one directory per environment, keyed by the request,
the interpreter, the indexes and the user's installed versions, and uv's download cache
beside them.  An environment is built in a temporary directory and renamed into place
only when complete and checked, so an interrupted build leaves nothing a later run
trusts (and a later run removes it).  Bounded: after each run the environments used
longest ago go until the cache is under its size (``DEFAULT_MAX_GB``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from shrinkgpu.versions.index import Indexes

CACHE_VERSION = 1
DEFAULT_MAX_GB = 30.0
# A source build of an old release can take an hour, needs compilers and headers the
# user's binaries were never built with, and would change more than the version: a
# version without a wheel for this interpreter counts as one that cannot be installed.
NO_BUILD = "--no-build"
UV_TIMEOUT = 3600.0  # a CUDA build of torch is several GB to download
READY = "env.json"
BUILDING = ".building-"
# uv's last lines say why a resolution or an install failed.
WHY_LINES = 6


class NotInstallable(Exception):
    """No environment could be made for a request; the message says why (uv's words)."""


@dataclass(frozen=True)
class Request:
    """One package at one version: what an environment changes."""

    name: str  # canonical
    version: str  # as the index spells it, a local variant included (2.12.0+cpu)

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Installed:
    """The user's environment as this interpreter sees it."""

    versions: dict[str, str]  # canonical name -> version
    from_index: frozenset[str]  # installed from an index (not editable, not a local path or URL)
    requires: dict[str, frozenset[str]]  # name -> the names it requires (markers evaluated)

    def dependents(self, name: str) -> set[str]:
        """The installed packages that require ``name``, directly or through others."""
        found: set[str] = set()
        frontier = {name}
        while frontier:
            frontier = {d for d, reqs in self.requires.items() if reqs & frontier and d not in found and d != name}
            found |= frontier
        return found

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(sorted(self.versions.items())).encode()).hexdigest()[:16]


def installed() -> Installed:
    """The distributions this interpreter imports, the first of each name on
    ``sys.path`` (the one ``import`` finds)."""
    versions: dict[str, str] = {}
    indexed: set[str] = set()
    requires: dict[str, frozenset[str]] = {}
    markers = default_environment()
    for dist in metadata.distributions():
        try:
            name = canonicalize_name(dist.metadata["Name"] or "")
        except (KeyError, TypeError):
            continue
        if not name or name in versions:
            continue
        versions[name] = dist.version
        if dist.read_text("direct_url.json") is None:
            indexed.add(name)
        names = set()
        for line in dist.requires or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({**markers, "extra": ""}):
                names.add(canonicalize_name(req.name))
        requires[name] = frozenset(names)
    return Installed(versions, frozenset(indexed), requires)


def same_version(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def uv_binary() -> str | None:
    """The uv executable: the one the ``uv`` package installed beside this interpreter,
    else one on PATH."""
    try:
        from uv import find_uv_bin  # the PyPI package ``uv`` ships its binary

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


@dataclass(frozen=True)
class Environment:
    """A ready overlay (or the user's own environment: ``site`` None)."""

    request: Request | None
    site: Path | None
    changed: tuple[tuple[str, str | None, str], ...] = ()  # (name, the user's version or None, this one's)
    kept: tuple[str, ...] = ()  # dependents that could not change with it and stay the user's
    variant: str = ""  # torch's build: "CPU", "CUDA 12.8", "ROCm 6.4"
    seconds: float = 0.0  # to build it (0 when reused)
    reused: bool = False

    def env(self, base: dict) -> dict:
        """``base`` (the user's variables) with the overlay first on the import path."""
        out = dict(base)
        if self.site is not None:
            out["PYTHONPATH"] = os.pathsep.join([str(self.site), *filter(None, [base.get("PYTHONPATH")])])
        return out

    @property
    def also(self) -> tuple[tuple[str, str | None, str], ...]:
        """What changed besides the requested package."""
        return tuple(c for c in self.changed if self.request is None or c[0] != self.request.name)

    def to_json(self) -> dict:
        return {"site": str(self.site) if self.site else None, "reused": self.reused,
                "build_seconds": round(self.seconds, 2), "variant": self.variant or None,
                "changed": [{"name": n, "yours": a, "here": b} for n, a, b in self.changed],
                "kept": list(self.kept)}


def torch_variant(version_py: Path) -> str:
    """The build of a torch installation, read from its ``torch/version.py`` (no import:
    importing a CUDA build takes seconds): "CUDA 12.8", "ROCm 6.4" or "CPU"."""
    try:
        text = version_py.read_text(encoding="utf-8")
    except OSError:
        return ""
    found = dict(re.findall(r"^(cuda|hip)\s*(?::\s*[^=]+)?=\s*'([^']+)'", text, re.M))
    if found.get("hip"):
        return f"ROCm {found['hip']}"
    if found.get("cuda"):
        return f"CUDA {found['cuda']}"
    return "CPU"


def users_torch_variant() -> str:
    try:
        import torch

        return torch_variant(Path(torch.__file__).parent / "version.py")
    except Exception:  # noqa: BLE001 - no torch, or one that does not import: nothing to follow
        return ""


# -- the cache -------------------------------------------------------------------------------------
def default_cache_dir() -> Path:
    own = os.environ.get("SHRINKGPU_VERSIONS_CACHE")
    if own:
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shrinkgpu" / "versions"


def size_of(path: Path) -> int:
    """Bytes under ``path``, each file once however many hard links it has (uv links
    the files of its download cache into the environments)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


@dataclass
class Cache:
    root: Path = field(default_factory=default_cache_dir)
    max_bytes: int = int(DEFAULT_MAX_GB * 2**30)

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    @property
    def uv_cache(self) -> Path:
        return self.root / "uv"

    def key(self, request: Request, user: Installed, indexes: Indexes) -> str:
        raw = json.dumps({"v": CACHE_VERSION, "python": os.path.realpath(sys.executable), "version": sys.version,
                          "request": request.pin, "user": user.fingerprint(), "indexes": indexes.to_json()},
                         sort_keys=True)
        digest = hashlib.sha256(raw.encode()).hexdigest()[:16]
        return f"{request.name}-{re.sub(r'[^A-Za-z0-9.+_-]', '_', request.version)}-{digest}"

    def ready(self, key: str) -> Environment | None:
        """The environment kept under ``key``, when it was completed."""
        where = self.envs / key
        try:
            data = json.loads((where / READY).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        os.utime(where / READY)  # used now: the last to go when the cache is trimmed
        request = Request(data["name"], data["version"])
        return Environment(request, where / "site", tuple((n, a, b) for n, a, b in data["changed"]),
                           tuple(data.get("kept", ())), data.get("variant", ""), 0.0, True)

    def sweep(self) -> None:
        """Builds left by runs that are gone (interrupted): removed, never trusted."""
        if not self.envs.is_dir():
            return
        for entry in self.envs.iterdir():
            if entry.name.startswith(BUILDING):
                pid = entry.name[len(BUILDING):].split("-", 1)[0]
                if not pid.isdigit() or not _alive(int(pid)):
                    shutil.rmtree(entry, ignore_errors=True)

    def trim(self, keep: set[str]) -> list[str]:
        """Remove the environments used longest ago (never those in ``keep``) until the
        cache is under its size; then uv's download cache when it alone is over.
        Returns the keys removed."""
        removed: list[str] = []
        if not self.envs.is_dir():
            return removed
        entries = sorted((e for e in self.envs.iterdir() if (e / READY).is_file()),
                         key=lambda e: (e / READY).stat().st_mtime)
        while entries and size_of(self.root) > self.max_bytes:
            victim = next((e for e in entries if e.name not in keep), None)
            if victim is None:
                break
            entries.remove(victim)
            shutil.rmtree(victim, ignore_errors=True)
            removed.append(victim.name)
        if size_of(self.root) > self.max_bytes and self.uv_cache.is_dir():
            shutil.rmtree(self.uv_cache, ignore_errors=True)  # its files stay alive in the environments' links
        return removed

    def clear(self) -> int:
        """Empty the cache; the bytes freed."""
        if not self.root.exists():
            return 0
        freed = size_of(self.root)
        shutil.rmtree(self.root, ignore_errors=True)
        return freed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# -- resolving and installing --------------------------------------------------------------------
def _uv(uv: str, args: list[str], cache: Cache, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "UV_CACHE_DIR": str(cache.uv_cache), "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    # UV_NO_CONFIG: the user's uv.toml is not their pip's configuration; the indexes
    # come from pip's (index.pip_indexes), as the options here say.
    return subprocess.run([uv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=UV_TIMEOUT)


def why(done: subprocess.CompletedProcess) -> str:
    """uv's reason, in its own words: the lines after its "No solution found" headline
    (the cause and the hint), else its last lines."""
    lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("Using CPython", "Resolved ", "Prepared ", "Installed "))]
    lines = [re.sub(r"^(error|cause|hint|╰─▶)\s*:?\s*", "", ln) for ln in lines
             if not ln.startswith("error: No solution found")]
    return " ".join(lines[-WHY_LINES:]) or f"uv exited with {done.returncode}"


def resolve(uv: str, request: Request, user: Installed, indexes: Indexes, cache: Cache,
            work: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The pins of a resolution of ``request`` with the user's dependents of it, the
    user's versions preferred; and the dependents that had to be left out (kept as the
    user's).  ``NotInstallable`` with uv's reason when nothing resolves."""
    dependents = sorted(d for d in user.dependents(request.name) if d in user.from_index)
    attempts = [dependents, []] if dependents else [[]]
    reason = ""
    for names in attempts:
        (work / "request.in").write_text("\n".join([request.pin, *names]) + "\n", encoding="utf-8")
        # An existing output file is read as preferences: the user's versions win where
        # they satisfy the request.
        prefs = [f"{n}=={v}" for n, v in sorted(user.versions.items()) if n in user.from_index and n != request.name]
        (work / "resolved.txt").write_text("\n".join(prefs) + "\n", encoding="utf-8")
        done = _uv(uv, ["pip", "compile", "request.in", "-o", "resolved.txt", "--python", sys.executable,
                        "--no-header", "--no-annotate", "--quiet", NO_BUILD, *indexes.uv_args()], cache, work)
        if done.returncode == 0:
            pins = {}
            for line in (work / "resolved.txt").read_text(encoding="utf-8").splitlines():
                name, sep, version = line.strip().partition("==")
                if sep and not line.startswith(("#", "-")):
                    pins[canonicalize_name(name)] = version.split(";")[0].strip()
            kept = tuple(dependents) if names != dependents else ()
            return pins, kept
        reason = reason or why(done)
    raise NotInstallable(reason)


def check_overlay(site: Path, changed: list[tuple[str, str | None, str]]) -> str | None:
    """None when every package the overlay holds is found there at its pinned version by
    an interpreter started as the runs start; else what leaked through."""
    probe = (
        "import importlib.metadata as m, importlib.util as u, json, sys\n"
        "out = {}\n"
        "for name, tops in json.loads(sys.argv[1]).items():\n"
        "    try: version = m.version(name)\n"
        "    except m.PackageNotFoundError: version = None\n"
        "    where = []\n"
        "    for top in tops:\n"
        "        try: spec = u.find_spec(top)\n"
        "        except Exception: spec = None\n"
        "        if spec is not None:\n"
        "            where.append(spec.origin if spec.origin not in (None, 'namespace') else\n"
        "                         list(spec.submodule_search_locations or [''])[0])\n"
        "    out[name] = [version, where]\n"
        "print(json.dumps(out))\n"
    )
    tops = {name: top_levels(site, name) for name, _old, _new in changed}
    env = Environment(None, site).env(dict(os.environ))
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(tops)], capture_output=True, text=True, env=env,
                          timeout=120)
    if done.returncode != 0:
        return f"the overlay could not be checked: {done.stderr.strip()[-300:]}"
    seen = json.loads(done.stdout)
    for name, _old, new in changed:
        version, where = seen.get(name, [None, []])
        if not same_version(version, new):
            return f"{name} is {version} there, not {new}"
        outside = [w for w in where if w and not os.path.realpath(w).startswith(os.path.realpath(site))]
        if outside:
            return f"{name} is imported from {outside[0]}, not from the overlay"
    return None


def top_levels(site: Path, name: str) -> list[str]:
    """The importable top-level names an installed distribution in ``site`` provides
    (from its RECORD), namespace portions (``nvidia``) left out: they are meant to be
    shared."""
    found: set[str] = set()
    for info in site.glob("*.dist-info"):
        if canonicalize_name(info.name.rsplit("-", 1)[0]) != name:
            continue
        try:
            lines = (info / "RECORD").read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            path = line.split(",", 1)[0]
            head = path.split("/", 1)[0]
            if head.endswith((".dist-info", ".data")) or head.startswith(("..", "_")) or head in ("bin",):
                continue
            if "/" not in path and path.endswith(".py"):
                found.add(head[:-3])
            elif (site / head / "__init__.py").is_file():
                found.add(head)
    return sorted(found)


def build(request: Request, user: Installed, indexes: Indexes, cache: Cache, uv: str) -> Environment:
    """The overlay for ``request``: from the cache when it was built before, else built
    in a temporary directory and renamed into place.  ``NotInstallable`` (with why)
    when it cannot be installed."""
    key = cache.key(request, user, indexes)
    kept = cache.ready(key)
    if kept is not None:
        return kept
    started = time.monotonic()
    cache.envs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{BUILDING}{os.getpid()}-", dir=cache.envs))
    try:
        pins, left = resolve(uv, request, user, indexes, cache, work)
        changed = [(n, user.versions.get(n), v) for n, v in sorted(pins.items())
                   if not same_version(user.versions.get(n), v)]
        site = work / "site"
        site.mkdir()
        if changed:
            done = _uv(uv, ["pip", "install", "--target", str(site), "--python", sys.executable, "--no-deps", "--quiet",
                            NO_BUILD, *indexes.uv_args(), *[f"{n}=={v}" for n, _old, v in changed]], cache, work)
            if done.returncode != 0:
                raise NotInstallable(why(done))
            (site / ".lock").unlink(missing_ok=True)  # uv's lock of the target while it installed
        leak = check_overlay(site, changed)
        if leak is not None:
            raise NotInstallable(f"the overlay does not hide your copy: {leak}")
        variant = torch_variant(site / "torch" / "version.py") if (site / "torch").is_dir() else ""
        seconds = time.monotonic() - started
        manifest = {"name": request.name, "version": request.version, "changed": changed, "kept": list(left),
                    "variant": variant, "build_seconds": round(seconds, 2), "indexes": indexes.to_json(),
                    "python": sys.executable, "built": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (work / READY).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        for scratch in ("request.in", "resolved.txt"):
            (work / scratch).unlink(missing_ok=True)
        try:
            os.rename(work, cache.envs / key)
        except OSError:  # another run completed the same environment first: theirs stands
            shutil.rmtree(work, ignore_errors=True)
            theirs = cache.ready(key)
            if theirs is None:
                raise NotInstallable(f"{cache.envs / key}: could not be put in place") from None
            return theirs
        return Environment(request, cache.envs / key / "site", tuple(changed), tuple(left), variant, seconds, False)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
