"""Run a program exactly as the user's script would run, in isolation, and observe it.

``Runner`` is the one object the reducer talks to.  It owns a sandbox (temporary
directories), prepares each run as a ``Job`` (a copy of the user's directory with the
candidate's files, and the typed request the probe reads) and hands it to an executor
(worker/executors.py: a fork server or fresh interpreters), so candidates run in
parallel as futures.  It learns from a fresh run of the original which modules to
preload.  It owns what its runs start from (the compile caches of an earlier run) and
the one retry a run lost to the infrastructure gets (``run_all``).
"""

from __future__ import annotations

import os
import shutil
import site
import sys
import sysconfig
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.worker.executors import (
    Executor,
    ExecutorSettings,
    ForkUnavailable,
    Isolation,
    Job,
    Placement,
    PreloadReport,
    local_placement,
)
from shrinkgpu.worker.factory import ExecutorFactory, Executors, default_executor
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.protocol import RunRequest, Watch
from shrinkgpu.worker.sandbox import Sandbox


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
    launch: Launch = PLAIN  # one process, or torchrun's ranks on this machine

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


def compile_caches(tmp: Path) -> dict[str, str]:
    """torch.compile's cache directories for one run, inside its temporary directory."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(tmp / "torchinductor"), "TRITON_CACHE_DIR": str(tmp / "triton")}


def cache_bytes(tmp: Path) -> int:
    """What a run left in the compile caches of ``compile_caches(tmp)`` (bytes)."""
    total = 0
    for where in compile_caches(tmp).values():
        for root, _dirs, names in os.walk(where):
            for name in names:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    pass
    return total


def seed_caches(template: Path, tmp: Path) -> None:
    """Put a copy of the compile caches left in ``template`` where a run in ``tmp``
    looks for its own.  A copy, not links: a run may rewrite an entry (an autotuning
    record) and must never change what the next run starts from."""
    for where in compile_caches(template).values():
        source = Path(where)
        if source.is_dir():
            shutil.copytree(source, tmp / source.name, symlinks=True, dirs_exist_ok=True)


class Runner:
    def __init__(
        self,
        spec: ScriptSpec,
        *,
        program_files: Iterable[str] = (),
        isolation: Isolation = Isolation.FORK,
        capture_ops: bool = True,
        keep_temp: bool = False,
        sandbox: Sandbox | None = None,
        threads: int | None = None,
        lanes: int = 1,
        executors: ExecutorFactory = default_executor,
    ):
        """``sandbox``: a template shared with other runners of the same reduction (the
        caller closes it); by default the runner copies the root directory itself.
        ``threads``: cap on each candidate's thread pools (``limit_threads``), None for
        the sizes a fresh interpreter picks.  ``lanes``: fork servers started with
        different random hash seeds, taken in turn: a forked child keeps its server's
        seed, so a failure that depends on the order of a set of strings needs several
        servers to be seen at the rate ``python`` shows (1 when the user's environment
        fixes ``PYTHONHASHSEED``).  ``executors``: what makes the executor of an
        isolation (the real ones by default; a fake in tests of the reduction's phases)."""
        self.spec = spec
        self.isolation = isolation
        self.capture_ops = capture_ops
        self.threads = threads
        self.program_files = frozenset(program_files) | {spec.script_rel}
        self.env = dict(os.environ if spec.env is None else spec.env)
        self._owns_sandbox = sandbox is None
        if sandbox is None:
            sandbox = Sandbox(spec.root_dir, stdin=spec.stdin, keep=keep_temp)
        self.sandbox = sandbox
        self._lanes = 1 if "PYTHONHASHSEED" in self.env else max(1, lanes)
        self.executors = Executors.of(executors)
        self._executor: Executor | None = None  # the candidates' executor
        self._fresh: Executor | None = None  # fresh interpreters beside a fork server, made when first asked
        self._lock = threading.Lock()
        self.preload_report: PreloadReport | None = None
        # A directory holding the compile caches a run of the original left (laid out as
        # ``compile_caches(...)``): each run not asked to be fresh starts with a copy.
        # None: every run compiles from nothing.
        self._warm_caches: Path | None = None
        # Which executor a run went to: a run lost with an executor that died since is
        # run again on the new one (``run_all``).
        self._generation = 0

    @property
    def lanes(self) -> int:
        return self._executor.lanes if self._executor is not None else self._lanes

    def placement(self) -> Placement:
        """Where this runner's candidates run (this machine before it started)."""
        executor = self._executor
        return executor.placement() if executor is not None else local_placement()

    def _settings(self, lanes: int) -> ExecutorSettings:
        # What preloaded imports put in their temporary directory (torch's compiler
        # caches) stays in the session and goes with it; each run gets its own TMPDIR.
        return ExecutorSettings(env={**self.env, "TMPDIR": str(self.sandbox.tmp)}, lanes=lanes, threads=self.threads,
                                launch=self.spec.launch, template=self.sandbox.template)

    # -- lifecycle ------------------------------------------------------------------
    def start(self, preload: Sequence[str] = (), *, required: bool = False) -> PreloadReport:
        """Start the executor; in fork isolation, preload ``preload`` (in order).

        When no fork-safe server can be made, every candidate runs fresh, or, with
        ``required``, ``ForkUnavailable`` is raised.  The report says which and why, for
        the user's first progress lines."""
        started = time.perf_counter()
        executor = self.executors(self.isolation, self._settings(self._lanes))
        try:
            report = executor.start(preload)
        except ForkUnavailable as unavailable:
            executor.close()
            if required:
                raise
            # Could not make a clean fork server: every candidate pays for a fresh interpreter.
            self.isolation = Isolation.FRESH
            executor = self.executors(Isolation.FRESH, self._settings(self._lanes))
            executor.start()
            report = PreloadReport(
                (), unavailable.dropped, time.perf_counter() - started, Isolation.FRESH,
                note=f"forking is not safe here ({unavailable.reason}); every candidate runs in a fresh interpreter",
            )
        self._executor = executor
        self._generation += 1
        self.preload_report = report
        return report

    # -- what runs start from --------------------------------------------------------
    @property
    def warm_caches(self) -> Path | None:
        """Where the compile caches every run not asked to be fresh starts from are, or None."""
        return self._warm_caches

    def use_warm_caches(self, directory: Path | None) -> None:
        """Start every later run not asked to be fresh with a copy of the compile caches
        an earlier run left in ``directory`` (``compile_caches(directory)``); None: each
        compiles from nothing."""
        self._warm_caches = directory

    def _fresh_executor(self) -> Executor:
        if self._executor is not None and self._executor.isolation is Isolation.FRESH:
            return self._executor
        with self._lock:
            if self._fresh is None:
                fresh = self.executors(Isolation.FRESH, self._settings(1))
                fresh.start()
                self._fresh = fresh
        return self._fresh

    def close(self) -> None:
        for executor in (self._executor, self._fresh):
            if executor is not None:
                executor.close()
        self._executor = self._fresh = None
        if self._owns_sandbox:
            self.sandbox.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- running --------------------------------------------------------------------
    def request(self, run, watch: Watch) -> RunRequest:
        """The probe's request for ``files`` in the run directory ``run``: the script as
        the user starts it, in the run's copy."""
        spec = self.spec
        script = run.root / spec.script_rel
        cwd = run.root / spec.cwd_rel if spec.cwd_rel is not None else run.root
        argv0 = spec.argv0 or spec.script.name
        if os.path.isabs(argv0):
            argv0 = str(script)
        elif os.path.normpath(os.path.join(cwd, argv0)) != os.path.normpath(script):
            # Typed relative to a cwd outside root: point at the copy instead.
            argv0 = os.path.relpath(script, cwd)
        return RunRequest(
            script=str(script),
            argv=(argv0, *spec.args),
            cwd=str(cwd),
            observation=str(run.observation),
            crash_log=str(run.crash_log),
            roots=(str(run.root),),
            module=spec.module,
            capture_ops=self.capture_ops,
            watch=watch,
        )

    def submit(
        self,
        files: Mapping[str, str],
        *,
        timeout: float,
        isolation: Isolation | None = None,
        env: Mapping[str, str] | None = None,
        watch: Watch = Watch(),
    ) -> Future:
        """Run ``files`` (path relative to root -> source); the future yields an Observation.

        ``env`` adds variables for this run only (GPU pinning); ``watch`` says what the
        run records beyond its first error.  Besides ``env``, a run differs from the
        user's environment in these: ``TMPDIR`` names the run's own ``tmp/``, so what the
        script leaves in its temporary directory goes with the run; torch.compile's
        caches (``TORCHINDUCTOR_CACHE_DIR``, which holds the FX graph cache, and
        ``TRITON_CACHE_DIR``, which defaults to one under the home directory) are in that
        ``tmp/`` too, even where the user set them, so that a kernel compiled for one
        candidate never makes another pass or fail (with ``warm_caches`` a run not asked
        for ``Isolation.FRESH`` starts with a copy of the original's); and, when
        ``threads`` caps the pools, the thread-count variables."""
        if self._executor is None:
            raise RuntimeError("Runner.start() was not called")
        fresh = (isolation or self.isolation) is Isolation.FRESH
        executor = self._fresh_executor() if fresh else self._executor
        run = self.sandbox.prepare(files, omit=self.program_files)
        if self._warm_caches is not None and isolation is not Isolation.FRESH:
            try:
                seed_caches(self._warm_caches, run.tmp)
            except BaseException:
                self.sandbox.release(run)
                raise
        job = Job(
            request=self.request(run, watch),
            run=run,
            timeout=timeout,
            stdin=self.sandbox.stdin,
            env={"TMPDIR": str(run.tmp), **compile_caches(run.tmp), **self.thread_env(), **(env or {})},
        )
        try:
            future = executor.submit(job)
        except BaseException:
            self.sandbox.release(run)
            raise
        result: Future = Future()

        def finish(done: Future) -> None:
            try:
                obs = done.result()
            except Exception as exc:  # noqa: BLE001 - an executor's failure is the infrastructure's
                obs = Observation.infrastructure(f"{type(exc).__name__}: {exc}")
            try:
                self.sandbox.release(run)
            finally:
                result.set_result(obs)

        future.add_done_callback(finish)
        return result

    def thread_env(self) -> dict[str, str]:
        if not self.threads:
            return {}
        from shrinkgpu.worker.probe import THREAD_VARIABLES

        return {name: str(self.threads) for name in THREAD_VARIABLES}

    def run(self, files: Mapping[str, str], *, timeout: float, isolation: Isolation | None = None,
            env: Mapping[str, str] | None = None, watch: Watch = Watch()) -> Observation:
        """One run of ``files`` (``submit``), waited for, run once more when the executor
        died under it (``run_all``)."""
        return self.run_all([(files, env or {})], timeout=timeout, isolation=isolation, watch=watch)[0]

    def run_all(self, programs: Sequence[tuple[Mapping[str, str], Mapping[str, str]]], *, timeout: float,
                isolation: Isolation | None = None, watch: Watch | None = None,
                at_once: int | None = None) -> list[Observation]:
        """One run of each (files, env) of ``programs``, ``at_once`` at a time (None: all
        at once), their observations in the same order.  A run lost to the
        infrastructure because its executor died (a supervisor killed, a fork server
        gone) is run once more on a restarted executor, with the same variables: a
        candidate never moves to another GPU, and a run that kills its worker twice is
        that run's observation, not a retry loop."""
        out: list[Observation] = []
        watch = watch or Watch()
        step = len(programs) if at_once is None else max(1, at_once)
        while len(out) < len(programs):
            batch = programs[len(out):len(out) + step]
            sent = [(self._generation, self.submit(files, timeout=timeout, isolation=isolation, env=env, watch=watch))
                    for files, env in batch]
            for (files, env), (generation, future) in zip(batch, sent):
                obs = future.result()
                if obs.infra_error and (not self.alive or generation != self._generation):
                    if not self.alive:
                        self.restart()
                    obs = self.submit(files, timeout=timeout, isolation=isolation, env=env, watch=watch).result()
                out.append(obs)
        return out

    @property
    def alive(self) -> bool:
        started = [e for e in (self._executor, self._fresh) if e is not None]
        return bool(started) and all(e.alive for e in started)

    def restart(self) -> None:
        """Start new executors after the old ones died, with the same preload."""
        for executor in (self._executor, self._fresh):
            if executor is not None:
                executor.close()
        self._executor = self._fresh = None
        modules = self.preload_report.modules if self.preload_report else ()
        self.start(modules)
