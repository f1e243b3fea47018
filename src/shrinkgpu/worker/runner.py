"""Run a program exactly as the user's script would run, in isolation, and observe it.

``Runner`` is the one object the reducer talks to.  It owns a sandbox (temporary
directories) and a supervisor, learns from a fresh run of the original which modules to
preload, and turns ``files -> Observation`` into a future so candidates can run in
parallel.
"""

from __future__ import annotations

import enum
import itertools
import os
import random
import site
import sys
import sysconfig
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from shrinkgpu.worker.executor import PreloadRefused, SupervisorClient, SupervisorGone
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.sandbox import Sandbox

PRELOAD_ATTEMPTS = 6


class ForkUnavailable(RuntimeError):
    """No fork server can be made that hands candidates a clean process."""

    def __init__(self, reason: str, dropped: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.dropped = dropped


class Isolation(str, enum.Enum):
    FORK = "fork"
    FRESH = "fresh"


@dataclass(frozen=True)
class ScriptSpec:
    """How the user runs the script: what every candidate must see too."""

    script: Path  # absolute path of the user's script
    args: tuple[str, ...] = ()
    cwd: Path = field(default_factory=Path.cwd)
    root: Path | None = None  # directory copied for each run; default: the script's
    env: Mapping[str, str] | None = None  # default: this process's environment
    stdin: bytes | None = None
    argv0: str | None = None  # argv[0] as the user typed it; default: the script's name
    module: str | None = None  # run as ``python -m module`` (``script`` is its file)

    @property
    def root_dir(self) -> Path:
        return (self.root or self.script.parent).resolve()

    @property
    def script_rel(self) -> str:
        return str(self.script.resolve().relative_to(self.root_dir))

    @property
    def cwd_rel(self) -> str | None:
        """The user's cwd relative to root, or None when it lies outside root."""
        try:
            return str(self.cwd.resolve().relative_to(self.root_dir))
        except ValueError:
            return None


@dataclass(frozen=True)
class PreloadReport:
    modules: tuple[str, ...]
    dropped: tuple[str, ...]  # modules refused because importing them threaded or touched CUDA
    seconds: float
    isolation: Isolation
    note: str = ""


def installed_paths() -> tuple[str, ...]:
    """Where installed (not user-written) modules live."""
    paths = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(os.path.realpath(p))
    for p in [*getattr(site, "getsitepackages", lambda: [])(), site.getusersitepackages()]:
        paths.add(os.path.realpath(p))
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        paths.add(os.path.realpath(os.path.join(p, "lib")))
    return tuple(sorted(paths))


def preload_candidates(
    modules: Iterable[tuple[str, str | None, str | None]], exclude_dirs: Iterable[Path] = ()
) -> list[str]:
    """The modules a run imported that the supervisor may import for every child.

    Only installed modules qualify: the user's own files are what the reduction edits,
    so each candidate must import its own copy.
    """
    installed = installed_paths()
    excluded = tuple(os.path.realpath(p) for p in exclude_dirs)
    out = []
    for name, file, local in modules:
        if name in ("__main__", "__mp_main__") or name.startswith("shrinkgpu"):
            continue
        if file is None or local is not None:
            continue  # built in (already there), a namespace package, or the user's own
        real = os.path.realpath(file)
        homes = [p for p in installed if real.startswith(p + os.sep)]
        if not homes:
            continue
        # Under the user's directory, a module is the user's, unless it lies in an
        # installed location inside that directory: a virtual environment in the project
        # (``python -m venv .venv`` beside the code, run from the project's root) holds
        # torch itself, and skipping it would leave the fork server without torch.
        if any(real.startswith(e + os.sep) and not any(h.startswith(e + os.sep) for h in homes) for e in excluded):
            continue
        out.append(name)
    return out


class Runner:
    def __init__(
        self,
        spec: ScriptSpec,
        *,
        program_files: Iterable[str] = (),
        exclude: Iterable[Path] = (),
        isolation: Isolation = Isolation.FORK,
        capture_ops: bool = True,
        keep_temp: bool = False,
        sandbox: Sandbox | None = None,
        threads: int | None = None,
        lanes: int = 1,
    ):
        """``sandbox``: a template shared with other runners of the same reduction (the
        caller closes it); by default the runner copies the root directory itself.
        ``threads``: cap on each candidate's thread pools (``limit_threads``), None for
        the sizes a fresh interpreter picks.  ``lanes``: fork servers started with
        different random hash seeds, taken in turn: a forked child keeps its server's
        seed, so a failure that depends on the order of a set of strings needs several
        servers to be seen at the rate ``python`` shows (1 when the user's environment
        fixes ``PYTHONHASHSEED``)."""
        self.spec = spec
        self.isolation = isolation
        self.capture_ops = capture_ops
        self.threads = threads
        self.program_files = frozenset(program_files) | {spec.script_rel}
        self.env = dict(os.environ if spec.env is None else spec.env)
        self._owns_sandbox = sandbox is None
        if sandbox is None:
            sandbox = Sandbox(spec.root_dir, exclude=exclude, stdin=spec.stdin, keep=keep_temp)
        self.sandbox = sandbox
        self.lanes = 1 if "PYTHONHASHSEED" in self.env else max(1, lanes)
        self._clients: list[SupervisorClient] = []
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self.preload_report: PreloadReport | None = None

    # -- lifecycle ------------------------------------------------------------------
    def start(self, preload: Sequence[str] = (), *, required: bool = False) -> PreloadReport:
        """Start the supervisor; in fork isolation, preload ``preload`` (in order).

        A module whose import makes forking unsafe is dropped (the script imports it
        itself, at a fresh interpreter's cost); when no fork-safe server can be made,
        every candidate runs fresh, or, with ``required``, ``ForkUnavailable`` is raised.
        The report says which and why, for the user's first progress lines."""
        import time

        started = time.perf_counter()
        if self.isolation is Isolation.FRESH:
            self._clients = [self._new_client(lane) for lane in range(self.lanes)]
            self.preload_report = PreloadReport((), (), 0.0, Isolation.FRESH)
            return self.preload_report
        modules = list(preload)
        dropped: list[str] = []
        reason = f"{PRELOAD_ATTEMPTS} modules in a row made forking unsafe"
        for _ in range(PRELOAD_ATTEMPTS):
            client = self._new_client(0)
            try:
                client.preload(modules, threads=self.threads)
            except PreloadRefused as refused:
                client.close()
                if refused.module is None:
                    reason = refused.reason
                    break  # tainted before any import, or by the preload as a whole
                bad = refused.module
                dropped.append(f"{bad} ({refused.reason})")
                # Its submodules would bring it back.
                modules = [m for m in modules if m != bad and not m.startswith(bad + ".")]
                continue
            self._clients = [client]
            for lane in range(1, self.lanes):
                other = self._new_client(lane)
                other.preload(modules, threads=self.threads)  # what one server took, the others take
                self._clients.append(other)
            self.preload_report = PreloadReport(
                tuple(modules), tuple(dropped), time.perf_counter() - started, Isolation.FORK
            )
            return self.preload_report
        if required:
            raise ForkUnavailable(reason, tuple(dropped))
        # Could not make a clean fork server: every candidate pays for a fresh interpreter.
        self.isolation = Isolation.FRESH
        self._clients = [self._new_client(lane) for lane in range(self.lanes)]
        self.preload_report = PreloadReport(
            (), tuple(dropped), time.perf_counter() - started, Isolation.FRESH,
            note=f"forking is not safe here ({reason}); every candidate runs in a fresh interpreter",
        )
        return self.preload_report

    def _new_client(self, lane: int = 0) -> SupervisorClient:
        # What preloaded imports put in their temporary directory (torch's compiler
        # caches) stays in the session and goes with it; each run gets its own TMPDIR.
        env = {**self.env, "TMPDIR": str(self.sandbox.tmp)}
        unset: tuple[str, ...] = ()
        if self.lanes > 1:
            # A seed of its own for each server; the script must not see the variable,
            # as a fresh interpreter with a random seed would not.
            env["PYTHONHASHSEED"] = str(random.randrange(1, 2**32 - 1))
            unset = ("PYTHONHASHSEED",)
        client = SupervisorClient(env=env, unset=unset)
        client.start()
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients = []
        if self._owns_sandbox:
            self.sandbox.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- running --------------------------------------------------------------------
    def submit(
        self,
        files: Mapping[str, str],
        *,
        timeout: float,
        isolation: Isolation | None = None,
        collect_modules: bool = False,
        collect_env: bool = False,
        count_loops: bool = False,
        env: Mapping[str, str] | None = None,
        capture: Mapping[str, object] | None = None,
        cut: str | None = None,
        save_objects: str | None = None,
    ) -> Future:
        """Run ``files`` (path relative to root -> source); the future yields an Observation.

        ``env`` adds variables for this run only (GPU pinning).  Besides those, a run
        differs from the user's environment in one variable: ``TMPDIR`` names the run's
        own ``tmp/``, so what the script leaves in its temporary directory goes with the
        run; and, when ``threads`` caps the pools, in the thread-count variables."""
        mode = isolation or self.isolation
        if mode is Isolation.FORK and self.isolation is Isolation.FRESH:
            mode = Isolation.FRESH
        run = self.sandbox.prepare(files, omit=self.program_files)
        spec = self.spec
        script = run.root / spec.script_rel
        cwd = run.root / spec.cwd_rel if spec.cwd_rel is not None else run.root
        argv0 = spec.argv0 or spec.script.name
        if os.path.isabs(argv0):
            argv0 = str(script)
        elif os.path.normpath(os.path.join(cwd, argv0)) != os.path.normpath(script):
            # Typed relative to a cwd outside root: point at the copy instead.
            argv0 = os.path.relpath(script, cwd)
        request = {
            "script": str(script),
            "argv": [argv0, *spec.args],
            "cwd": str(cwd),
            "observation": str(run.observation),
            "crash_log": str(run.crash_log),
            "module": spec.module,
            "roots": [str(run.root)],
            "capture_ops": self.capture_ops,
            "collect_modules": collect_modules,
            "collect_env": collect_env,
            "count_loops": count_loops,
            # {"op": name, "call": N, "path": file}: save that call's arguments before it runs
            "capture": dict(capture) if capture else None,
            # a path: where a library called back into a user object, save that call
            "cut": cut,
            # a directory: at the first error, pickle the user's data objects there
            "save_objects": save_objects,
        }
        extra = {"TMPDIR": str(run.tmp), **self.thread_env(), **(env or {})}
        if mode is Isolation.FRESH:
            import json

            run.request.write_text(json.dumps(request), encoding="utf-8")
        cmd = {
            "mode": mode.value,
            "request": request,
            "request_path": str(run.request),
            "timeout": timeout,
            "stdin": str(self.sandbox.stdin),
            "stdout": str(run.stdout),
            "stderr": str(run.stderr),
            "env": extra,
        }
        result: Future = Future()
        if not self._clients:
            raise RuntimeError("Runner.start() was not called")
        client = self._clients[next(self._turn) % len(self._clients)]
        try:
            raw = client.submit(cmd)
        except SupervisorGone as exc:
            self.sandbox.release(run)
            result.set_result(Observation.infrastructure(str(exc)))
            return result

        def finish(raw_fut: Future) -> None:
            interrupted = None
            try:
                event = raw_fut.result()
                obs = Observation.from_run(
                    event, run.observation, run.stdout, run.stderr, crash_log=run.crash_log, root=run.root
                )
            except SupervisorGone as exc:
                obs = Observation.infrastructure(str(exc))
            except KeyboardInterrupt as exc:
                # Ctrl-C while this ran in the main thread (a future already done when
                # the callback was added): the run is lost, the interrupt is not.
                obs = Observation.infrastructure("the run was cancelled")
                interrupted = exc
            except Exception as exc:  # noqa: BLE001 - surfaced as an infrastructure failure
                obs = Observation.infrastructure(f"{type(exc).__name__}: {exc}")
            try:
                self.sandbox.release(run)
            finally:
                result.set_result(obs)
            if interrupted is not None:
                raise interrupted

        raw.add_done_callback(finish)
        return result

    def thread_env(self) -> dict[str, str]:
        if not self.threads:
            return {}
        from shrinkgpu.worker.probe import THREAD_VARIABLES

        return {name: str(self.threads) for name in THREAD_VARIABLES}

    def run(self, files: Mapping[str, str], **kwargs) -> Observation:
        return self.submit(files, **kwargs).result()

    @property
    def alive(self) -> bool:
        return bool(self._clients) and all(c.alive for c in self._clients)

    def restart(self) -> None:
        """Start a new supervisor after the old one died, with the same preload."""
        for client in self._clients:
            client.close()
        self._clients = []
        modules = self.preload_report.modules if self.preload_report else ()
        self.start(modules)
