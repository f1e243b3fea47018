"""Temporary directories in which candidates run, so that the user's files never change.

Each candidate gets ``run-N/root/``: a tree shaped like the user's root directory (by
default the script's own directory), with the candidate's program files written fresh
and everything else hard-linked from a private *template* copy made once per session.
Links make a run directory cheap whatever the size of the data beside the script, and
because they point into our copy, a script that writes into a file in place can only
damage the template: that is detected after each run by comparing size and mtime, and
the file is copied again from the original.

A finished run's directory is not removed but reset and used again by a later run: what
the run made is removed and what it deleted or replaced is linked again, found by
listing each directory (the inode of a link comes with the listing).  Making and
removing a tree costs a metadata write per directory and file, listing it only reads:
with the script in a project of a few hundred files, that was most of a candidate's
cost on a disk where ``mkdir`` takes 0.2 ms.  ``keep`` keeps every run's own directory
for inspection instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from shrinkgpu.inputs import encode_source

# Directories that are never part of what a script needs at run time.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".hypothesis", "node_modules", ".ipynb_checkpoints"}
)
TEMPLATE_FILE_LIMIT = 20_000
TEMPLATE_BYTES_LIMIT = 4 << 30


class SandboxError(Exception):
    pass


@dataclass(frozen=True)
class RunDir:
    path: Path  # run-N/
    root: Path  # run-N/root: the copy of the user's root directory
    use: int = 0  # which run of the session this is: names its temporary directory

    @property
    def stdout(self) -> Path:
        return self.path / "stdout"

    @property
    def stderr(self) -> Path:
        return self.path / "stderr"

    @property
    def observation(self) -> Path:
        return self.path / "observation.json"

    @property
    def request(self) -> Path:
        return self.path / "request.json"

    @property
    def crash_log(self) -> Path:
        """Where faulthandler writes the Python stack if the run dies by a signal."""
        return self.path / "crash.txt"

    @property
    def tmp(self) -> Path:
        """The run's temporary directory (its ``TMPDIR``), removed with the run.  Named
        after the run, not the directory: a later run in the same directory compiles
        into caches at a path no earlier run used."""
        return self.path / f"tmp-{self.use:06d}"


def _fingerprint(path: Path | str) -> tuple[int, ...]:
    # Not ctime: linking and unlinking (what every run does to every file) change it, and
    # with it every file would be copied again after every run.  A script that writes
    # into a linked file and then restores its size and mtime goes unseen.  The inode
    # last: a run directory's link is intact when it names the template file's inode.
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_mode, st.st_ino)


def _remove(path: str, entry: os.DirEntry | None = None) -> None:
    """Remove a file, a link or a whole directory a run left."""
    is_dir = entry.is_dir(follow_symlinks=False) if entry is not None else (
        os.path.isdir(path) and not os.path.islink(path))
    if is_dir:
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _is_session(path: Path) -> bool:
    return path.name.startswith("shrinkgpu-") and (path / "template").is_dir()


# In a session directory while its reduction runs: the owner's pid and start time.  A
# session whose owner is gone without closing it (SIGKILL, the OOM killer, a CI runner's
# hard stop) is swept by the next reduction; a session kept on purpose (``--keep-temp``)
# loses this file when its owner closes it, and is never swept.
OWNER_FILE = "owner"


def _identity(pid: int) -> str | None:
    """``pid`` and its start, which tell a process from a later one given its pid; None
    when no such process runs.

    On Linux the start is the kernel's count of clock ticks since boot
    (``/proc/<pid>/stat``), not psutil's ``create_time``: that one is the boot's wall-clock
    time plus the ticks, and the boot's wall-clock time moves when the clock is stepped
    (NTP, a virtual machine resumed), so a live reduction's session looked like a dead
    one's and another reduction's sweep removed it under it."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").is_file():
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
        except FileNotFoundError:
            return None
        except (OSError, IndexError):
            return "unknown"
        if fields[:1] == [b"Z"]:
            return None  # ended; its parent has not collected it yet
        try:
            return f"{pid} ticks {int(fields[19])}"  # field 22, counted after the name's ")"
        except (IndexError, ValueError):
            return "unknown"
    import psutil

    try:
        return f"{pid} {psutil.Process(pid).create_time():.2f}"
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return "unknown"


def sweep_stale_sessions(tempdir: Path | None = None) -> list[tuple[Path, int]]:
    """Remove the session directories in ``tempdir`` (default: the system's) whose owner
    died without closing them; the directories removed and their sizes in bytes."""
    base = Path(tempdir or tempfile.gettempdir())
    removed = []
    try:
        entries = [p for p in base.iterdir() if p.name.startswith("shrinkgpu-")]
    except OSError:
        return removed
    for path in entries:
        try:
            owner = (path / OWNER_FILE).read_text(encoding="ascii").strip()
            pid = int(owner.split()[0])
        except (OSError, ValueError, IndexError):
            continue  # not a session, one kept on purpose, or one just being made
        try:
            mine = path.stat().st_uid == os.getuid()
        except OSError:
            continue
        if not mine or _identity(pid) in (owner, "unknown"):
            continue  # another user's, or its reduction still runs (or cannot be told)
        size, seen = 0, set()
        for dirpath, _, filenames in os.walk(path):
            for name in filenames:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:  # a run's links are the template's files
                    seen.add((st.st_dev, st.st_ino))
                    size += st.st_size
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append((path, size))
    return removed


class Sandbox:
    def __init__(
        self,
        root: Path,
        *,
        exclude: Iterable[Path] = (),
        stdin: bytes | None = None,
        keep: bool = False,
    ):
        self.root = Path(root).resolve()
        self.exclude = frozenset(Path(p).resolve() for p in exclude)
        self.keep = keep
        self.session = Path(tempfile.mkdtemp(prefix="shrinkgpu-"))
        self.template = self.session / "template"
        self.template.mkdir()
        self.stdin = self.session / "stdin"
        self.tmp = self.session / "tmp"  # the supervisors' TMPDIR
        self.tmp.mkdir()
        self.stdin.write_bytes(stdin or b"")
        owner = _identity(os.getpid())
        if owner not in (None, "unknown"):
            (self.session / OWNER_FILE).write_text(owner, encoding="ascii")
        self._counter = itertools.count()
        self._uses = itertools.count()
        self._stats: dict[str, tuple[int, ...]] = {}
        self._dirs: list[str] = []
        self._links: dict[str, str] = {}
        # Run directories reset after their run, ready for the next: (run, the template's
        # generation it was reset against).  prepare() and release() come from different
        # threads (release from the executor's reader).
        self._free: list[tuple[RunDir, int]] = []
        self._generation = 0  # counts repairs of the template: a link made before one may be stale
        self._lock = threading.Lock()
        try:
            self._build_template()
        except BaseException:
            self.close()  # a refused or interrupted copy leaves nothing behind
            raise

    def _build_template(self) -> None:
        count = size = 0
        for dirpath, dirnames, filenames in os.walk(self.root):
            here = Path(dirpath)
            rel_dir = here.relative_to(self.root)
            keep = []
            for d in sorted(dirnames):
                if d in SKIP_DIRS or (here / d).resolve() in self.exclude:
                    continue
                if (here / d / "pyvenv.cfg").is_file():
                    continue  # a virtual environment of any name (``env``, ``.ci-venv``)
                if _is_session(here / d):
                    # This session's own directory (a script in the temporary directory
                    # would copy its copy forever), or another reduction's.
                    continue
                if (here / d).is_symlink():
                    # A linked data directory (``data -> /mnt/datasets``) is shared, not
                    # copied: it can be any size, and scripts read datasets.
                    self._links[str(rel_dir / d)] = os.readlink(here / d)
                    continue
                keep.append(d)
            dirnames[:] = keep
            (self.template / rel_dir).mkdir(exist_ok=True)
            if rel_dir != Path("."):
                self._dirs.append(str(rel_dir))
            for name in sorted(filenames):
                src = here / name
                rel = str(rel_dir / name) if rel_dir != Path(".") else name
                if src.resolve() in self.exclude:
                    continue
                if not src.is_file():
                    continue
                count += 1
                size += src.stat().st_size
                if count > TEMPLATE_FILE_LIMIT or size > TEMPLATE_BYTES_LIMIT:
                    what = (f"more than {TEMPLATE_FILE_LIMIT} files" if count > TEMPLATE_FILE_LIMIT
                            else f"more than {TEMPLATE_BYTES_LIMIT >> 30} GiB")
                    raise SandboxError(
                        f"{self.root} holds {what}; every candidate runs in a copy of it (copied "
                        "once). Point --root at a smaller directory that still holds what the "
                        "script reads, or link big data in (a symlinked directory is shared, "
                        "not copied)."
                    )
                dst = self.template / rel
                shutil.copy2(src, dst)
                self._stats[rel] = _fingerprint(dst)

    def add_file(self, rel: str, source: Path) -> None:
        """A file every later run has beside the program (a call's saved arguments)."""
        dst = self.template / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        # Copied beside it, then moved in: a new inode, never new bytes in one that earlier
        # runs link to, and the lock is not held while a state of gigabytes is copied.
        staged = dst.with_name(f".{dst.name}.adding")
        shutil.copy2(source, staged)
        with self._lock:
            parts = Path(rel).parts[:-1]
            for i in range(1, len(parts) + 1):
                d = str(Path(*parts[:i]))
                if d not in self._dirs:
                    self._dirs.append(d)
            os.replace(staged, dst)
            self._stats[rel] = _fingerprint(dst)
            # A run directory reset before now lacks the file: reset again before its next run.
            self._generation += 1

    def prepare(self, files: Mapping[str, str], omit: Iterable[str] = ()) -> RunDir:
        """A fresh run directory holding ``files`` (path relative to root -> text) and a
        link to every other file of the template but those in ``omit`` (the program's
        files that this candidate no longer has)."""
        skip = set(omit)
        use = next(self._uses)
        run = self._reused()
        if run is None:
            path = self.session / f"run-{next(self._counter):06d}"
            run = RunDir(path=path, root=path / "root", use=use)
            run.root.mkdir(parents=True)
            run.tmp.mkdir()
            for d in self._dirs:
                (run.root / d).mkdir(exist_ok=True)
            for rel in self._stats:
                # A program file is written fresh, never through a link.
                if rel not in files and rel not in skip:
                    os.link(self.template / rel, run.root / rel)
            for rel in self._links:
                os.symlink(self._link_target(rel), run.root / rel)
        else:
            run = dataclasses.replace(run, use=use)
            run.tmp.mkdir()
            for rel in skip | set(files):
                if rel in self._stats:
                    os.unlink(run.root / rel)
        for rel, text in files.items():
            target = run.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # In the encoding the source declares: a latin-1 script's strings stay its own.
            target.write_bytes(encode_source(text))
        return run

    def release(self, run: RunDir) -> None:
        """Repair the template if the run wrote into a linked file, then reset the run's
        directory for a later run (or, with ``keep``, leave it as the run left it)."""
        template = str(self.template)
        with self._lock:
            for rel, before in self._stats.items():
                try:
                    now = _fingerprint(os.path.join(template, rel))
                except FileNotFoundError:
                    now = None
                if now != before:
                    # Unlink first: the damaged inode may still be linked from elsewhere.
                    (self.template / rel).unlink(missing_ok=True)
                    shutil.copy2(self.root / rel, self.template / rel)
                    self._stats[rel] = _fingerprint(self.template / rel)
                    self._generation += 1
            generation = self._generation
        if self.keep:
            return
        if self._reset(run):
            with self._lock:
                self._free.append((run, generation))
        else:
            shutil.rmtree(run.path, ignore_errors=True)

    def _reused(self) -> RunDir | None:
        """A reset run directory, reset again if the template was repaired since."""
        while True:
            with self._lock:
                if not self._free:
                    return None
                run, generation = self._free.pop()
                current = self._generation
            if generation == current or self._reset(run):
                return run
            shutil.rmtree(run.path, ignore_errors=True)

    def _link_target(self, rel: str) -> str:
        target = self._links[rel]
        return os.path.realpath(target if os.path.isabs(target) else str((self.root / rel).parent / target))

    def _reset(self, run: RunDir) -> bool:
        """Make ``run`` what prepare() makes before it writes the program: every template
        file linked, the template's directories and shared links, nothing else (the
        temporary directory is made by prepare(), under the next run's name).  A directory
        the run removed, or one added to the template since (add_file), is made; False
        when the tree could not be read or repaired (then it is made again instead)."""
        try:
            for entry in os.scandir(run.path):
                if entry.name != "root":
                    _remove(entry.path, entry)  # the run's tmp/, output and observation
            root, template = str(run.root), str(self.template)
            with self._lock:  # add_file() may change them from another thread
                inodes = {rel: fp[3] for rel, fp in self._stats.items()}
                ordered = tuple(self._dirs)
            dirs = frozenset(ordered)
            children: dict[str, list[str]] = {}
            for rel in (*inodes, *ordered, *self._links):
                children.setdefault(os.path.dirname(rel), []).append(rel)
            for d in ("", *ordered):
                here = os.path.join(root, d) if d else root
                present = set()
                for entry in os.scandir(here):
                    rel = os.path.join(d, entry.name) if d else entry.name
                    present.add(rel)
                    if rel in inodes:
                        if entry.is_symlink() or entry.inode() != inodes[rel]:
                            # replaced, or written fresh (a program file): linked again
                            _remove(entry.path, entry)
                            os.link(os.path.join(template, rel), entry.path)
                    elif rel in self._links:
                        if not entry.is_symlink() or os.readlink(entry.path) != self._link_target(rel):
                            _remove(entry.path, entry)
                            os.symlink(self._link_target(rel), entry.path)
                    elif rel in dirs:
                        if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                            _remove(entry.path, entry)  # a file or link where the template has a directory
                            os.mkdir(entry.path)
                    else:
                        _remove(entry.path, entry)  # made by the run (__pycache__ too)
                for rel in children.get(d, ()):
                    if rel not in present:
                        if rel in dirs:
                            os.mkdir(os.path.join(root, rel))  # scanned in its turn: parents come first
                        elif rel in inodes:
                            os.link(os.path.join(template, rel), os.path.join(root, rel))
                        else:
                            os.symlink(self._link_target(rel), os.path.join(root, rel))
            return True
        except OSError:
            return False  # a directory the run made unreadable, say: made again instead

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.session, ignore_errors=True)
        else:
            (self.session / OWNER_FILE).unlink(missing_ok=True)  # kept on purpose: never swept

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
