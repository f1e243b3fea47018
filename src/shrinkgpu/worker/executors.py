"""Ways to run a candidate: one interface, one class per way.

A ``Job`` is one prepared run: its directory (a copy of the user's directory holding
the candidate's files), the request the probe will read, its time limit and the
variables it adds to the user's environment.  An ``Executor`` turns a job into a
future ``Observation``.  ``Runner`` prepares jobs (the sandbox) and chooses the executor;
it never knows how a job runs.

The two ways on one machine, both through a supervisor process (worker/supervisor.py)
that kills a candidate's whole process tree:

* ``ForkServer``: the supervisor imports torch and the script's libraries once and forks
  a child per candidate (milliseconds); refused, module by module, when a module makes
  forking unsafe (docs/executors.md).
* ``FreshInterpreters``: a new ``python`` per candidate, as the user runs it (seconds).

A third wraps either: ``Ranks`` (worker/ranks.py) runs a job as torchrun's ranks, one
run of the wrapped executor per rank, when the script is launched that way.  A new way
to run (actors on other hosts) is one more subclass of ``Executor``, chosen by the
factory a ``Runner`` is given.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import itertools
import json
import random
import socket
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.worker.client import PreloadRefused, SupervisorClient, SupervisorGone
from shrinkgpu.worker.group import (
    HangRule,
    Waiting,
    bring_back_capture,
    child_observations,
    children_waiting,
    said_started,
    with_children,
)
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.protocol import Finished, RunCommand, RunRequest
from shrinkgpu.worker.sandbox import RunDir

# Fork servers started in a row, each without the module that made the previous one
# unsafe, before forking is given up.
PRELOAD_ATTEMPTS = 6


class Isolation(str, enum.Enum):
    FORK = "fork"
    FRESH = "fresh"


@dataclass(frozen=True)
class Dropped:
    """A module the fork server did not preload, and why: forking after importing it was
    unsafe (the candidates import it themselves, at a fresh interpreter's cost)."""

    module: str
    reason: str

    def __str__(self) -> str:
        return f"{self.module} ({self.reason})"

    def to_json(self) -> dict:
        return {"module": self.module, "reason": self.reason}


class ForkUnavailable(RuntimeError):
    """No fork server can be made that hands candidates a clean process."""

    def __init__(self, reason: str, dropped: tuple[Dropped, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.dropped = dropped


@dataclass(frozen=True)
class PreloadReport:
    modules: tuple[str, ...]
    dropped: tuple[Dropped, ...]  # modules refused because importing them threaded or touched CUDA
    seconds: float
    isolation: Isolation
    note: str = ""


@dataclass(frozen=True)
class ExecutorSettings:
    """What every run of one executor shares."""

    env: Mapping[str, str]  # the environment the script sees (the user's, with the session's TMPDIR)
    # servers with their own random hash seeds, taken in turn (a fork keeps its server's
    # seed; see Runner)
    lanes: int = 1
    threads: int | None = None  # cap on each candidate's thread pools; None: as python sizes them
    launch: Launch = PLAIN  # how the script's processes start: one, or torchrun's ranks
    # the copy of the user's directory every run is made from (what an executor on other
    # hosts ships); None: not known to the executor
    template: Path | None = None


@dataclass(frozen=True)
class Placement:
    """Where an executor's candidates run: for the summary and ``--json``."""

    executor: str  # "local" (this machine's fork servers or fresh interpreters) or "ray"
    nodes: tuple[str, ...]  # the hosts (a Ray cluster: its nodes' addresses)
    workers: int | None = None  # processes that take candidates; None: one per candidate in flight
    # workers lost while the search ran: {"node", "seconds" (since the executor started),
    # "reran" (candidates run again elsewhere because of it), "why"}
    lost: tuple[dict, ...] = ()

    def to_json(self) -> dict:
        return {"executor": self.executor, "nodes": list(self.nodes), "workers": self.workers,
                "lost": [dict(x) for x in self.lost]}

    def lost_text(self) -> str:
        """The workers lost, in words (the report, the notes); empty when none was."""
        return "; ".join(f"a worker on node {x['node']} was lost {x['seconds']:.0f} s in ({x['why']}), and "
                         f"{x['reran']} candidate{'s' if x['reran'] != 1 else ''} ran again on another"
                         for x in self.lost)


def local_placement() -> Placement:
    return Placement("local", (socket.gethostname(),))


@dataclass(frozen=True)
class Job:
    request: RunRequest
    run: RunDir  # the run's directory: the request file, stdout, stderr, the observation
    timeout: float
    stdin: Path
    env: Mapping[str, str]  # variables this run adds (its TMPDIR, GPU pinning, thread caps)


class Executor(abc.ABC):
    """Runs jobs; each future yields the run's ``Observation`` (an infrastructure
    failure is an observation too, never an exception)."""

    isolation: Isolation
    lanes: int = 1

    @abc.abstractmethod
    def start(self, preload: Sequence[str] = ()) -> PreloadReport:
        """Be ready to run; preload what the executor can preload.  ``ForkUnavailable``
        when this way of running cannot be made safe here."""

    @abc.abstractmethod
    def submit(self, job: Job) -> Future:
        """Start ``job``; the future yields its Observation."""

    @property
    @abc.abstractmethod
    def alive(self) -> bool:
        """Whether runs can still be submitted (False after the infrastructure died)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop, killing whatever still runs."""

    def cancel(self, future: Future) -> None:  # noqa: B027 - a default that does nothing, not abstract
        """Stop the run ``future`` stands for (its observation then says it was cancelled);
        nothing for a run that is over, or an executor that cannot stop one run alone."""

    def placement(self) -> Placement:
        """Where the candidates run: this machine, one process per candidate in flight."""
        return local_placement()


class SupervisedExecutor(Executor):
    """Jobs run by supervisor processes, one or several (lanes) taken in turn."""

    mode: str  # the supervisor's name for how a child starts: "fork" or "fresh"

    def __init__(self, settings: ExecutorSettings):
        self.settings = settings
        self.lanes = max(1, settings.lanes)
        self._clients: list[SupervisorClient] = []
        self._turn = itertools.count()
        self._runs: dict[Future, tuple[SupervisorClient, int]] = {}  # what cancel() stops
        # The processes a script starts itself, watched for a hang (the one rule,
        # worker/group.py) by one thread for every run in flight.
        self._children = ChildWatch(settings.launch.hang_after, self.cancel)

    def _new_client(self, lane: int = 0) -> SupervisorClient:
        env = dict(self.settings.env)
        unset: tuple[str, ...] = ()
        if self.lanes > 1:
            # A seed of its own for each server; the script must not see the variable,
            # as a fresh interpreter with a random seed would not.
            env["PYTHONHASHSEED"] = str(random.randrange(1, 2**32 - 1))
            unset = ("PYTHONHASHSEED",)
        client = SupervisorClient(env=env, unset=unset)
        client.start()
        return client

    def _command(self, job: Job, run_id: int) -> RunCommand:
        return RunCommand(id=run_id, mode=self.mode, request=job.request, request_path=str(job.run.request),
                          timeout=job.timeout, stdin=str(job.stdin), stdout=str(job.run.stdout),
                          stderr=str(job.run.stderr), env=dict(job.env))

    def submit(self, job: Job) -> Future:
        if not self._clients:
            raise RuntimeError("the executor was not started")
        result: Future = Future()
        client = self._clients[next(self._turn) % len(self._clients)]
        ids: list[int] = []

        def command(run_id: int) -> RunCommand:
            ids.append(run_id)
            return self._command(job, run_id)

        try:
            raw = client.submit(command)
        except SupervisorGone as exc:
            result.set_result(Observation.infrastructure(str(exc)))
            return result
        self._runs[result] = (client, ids[0])

        def finish(raw_fut: Future) -> None:
            interrupted = None
            try:
                obs = self.observation(raw_fut.result(), job)
            except SupervisorGone as exc:
                obs = Observation.infrastructure(str(exc))
            except KeyboardInterrupt as exc:
                # Ctrl-C while this ran in the main thread (a future already done when
                # the callback was added): the run is lost, the interrupt is not.
                obs = Observation.infrastructure("the run was cancelled")
                interrupted = exc
            except Exception as exc:  # noqa: BLE001 - surfaced as an infrastructure failure
                obs = Observation.infrastructure(f"{type(exc).__name__}: {exc}")
            self._runs.pop(result, None)
            result.set_result(obs)
            if interrupted is not None:
                raise interrupted

        self._children.add(result, job)
        raw.add_done_callback(finish)
        return result

    def observation(self, event: Finished, job: Job) -> Observation:
        """What the run of ``job`` that ``event`` ended showed: with the processes the
        script started itself, as one (worker/group.py)."""
        run = job.run
        hang = self._children.hang_of(job)
        if hang is not None:
            event = dataclasses.replace(event, cancelled=False)  # stopped because it hangs: the reports stand
        obs = said_started(Observation.from_run(event, run.observation, run.stdout, run.stderr,
                                                crash_log=run.crash_log, root=run.root), run.observation)
        if not obs.children and hang is None:
            return obs
        children = child_observations(obs, run.observation, run.crash_log, run.stdout, run.stderr, run.root)
        obs = with_children(obs, children, hang, self.settings.launch.starter)
        if obs.launcher is not None and obs.rank is not None:
            watch = job.request.watch
            bring_back_capture(watch, job.request.for_child(obs.rank).watch)
        return obs

    @property
    def alive(self) -> bool:
        return bool(self._clients) and all(c.alive for c in self._clients)

    def cancel(self, future: Future) -> None:
        run = self._runs.get(future)
        if run is not None:
            client, run_id = run
            client.cancel(run_id)

    def close(self) -> None:
        self._children.close()
        for client in self._clients:
            client.close()
        self._clients = []


class ChildWatch:
    """One thread that reads, for every run in flight for a second or more, where the
    processes its script started wait (``<observation>.collectives.child<k>``); a run
    whose processes hang by the rule is cancelled, and its hang kept for its observation.
    Nothing is read of a run before its first second: most candidates are over by then."""

    POLL = 0.5
    QUIET = 1.0

    def __init__(self, hang_after: float, cancel: Callable[[Future], None]):
        self.hang_after = hang_after
        self.cancel = cancel
        self._runs: dict[Future, tuple[Job, float, HangRule]] = {}
        self._hangs: dict[Path, Waiting] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, future: Future, job: Job) -> None:
        with self._lock:
            self._runs[future] = (job, time.monotonic(), HangRule(self.hang_after))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="shrinkgpu-children")
                self._thread.start()
        future.add_done_callback(self._drop)

    def _drop(self, future: Future) -> None:
        with self._lock:
            self._runs.pop(future, None)

    def hang_of(self, job: Job) -> Waiting | None:
        with self._lock:
            return self._hangs.pop(job.run.path, None)

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL):
            now = time.monotonic()
            with self._lock:
                runs = [(f, j, r) for f, (j, t, r) in self._runs.items() if now - t >= self.QUIET and not f.done()]
            for future, job, rule in runs:
                observation = str(job.run.observation)
                hang = rule.check(*children_waiting(f"{observation}.collectives", observation), now=now)
                if hang is not None:
                    with self._lock:
                        self._hangs[job.run.path] = hang
                        self._runs.pop(future, None)
                    self.cancel(future)

    def close(self) -> None:
        self._stop.set()


class FreshInterpreters(SupervisedExecutor):
    """A new interpreter per run, started by a supervisor that imported nothing of the
    user's: what ``python script.py`` does, at its cost."""

    isolation = Isolation.FRESH
    mode = "fresh"

    def __init__(self, settings: ExecutorSettings):
        # Every fresh interpreter draws its own hash seed: servers with seeds of their
        # own would add nothing.
        super().__init__(dataclasses.replace(settings, lanes=1))

    def start(self, preload: Sequence[str] = ()) -> PreloadReport:
        self._clients = [self._new_client(0)]
        return PreloadReport((), (), 0.0, Isolation.FRESH)

    def _command(self, job: Job, run_id: int) -> RunCommand:
        # The interpreter reads its request from the run's directory.
        job.run.request.write_text(json.dumps(job.request.to_json()), encoding="utf-8")
        return super()._command(job, run_id)


class ForkServer(SupervisedExecutor):
    """Supervisors that preloaded the script's installed modules and fork a child per
    run; one per lane."""

    isolation = Isolation.FORK
    mode = "fork"

    def _command(self, job: Job, run_id: int) -> RunCommand:
        if self.settings.launch.fresh_children and not job.request.watch.zygote:
            # The ranks the script spawns are forked from a copy of the candidate made
            # before the script ran, not started as new interpreters (probe/children.py).
            watch = dataclasses.replace(job.request.watch, zygote=self.settings.launch.fresh_children)
            job = dataclasses.replace(job, request=dataclasses.replace(job.request, watch=watch))
        return super()._command(job, run_id)

    def start(self, preload: Sequence[str] = ()) -> PreloadReport:
        """Preload ``preload`` (in order).  A module whose import makes forking unsafe is
        dropped (the script imports it itself, at a fresh interpreter's cost) and a new
        server is started without it; ``ForkUnavailable`` when no fork-safe server can
        be made.  The report says what was dropped and why, for the first progress lines."""
        started = time.perf_counter()
        modules = list(preload)
        dropped: list[Dropped] = []
        reason = f"{PRELOAD_ATTEMPTS} modules in a row made forking unsafe"
        deep_each = False
        for _ in range(PRELOAD_ATTEMPTS):
            client = self._new_client(0)
            try:
                client.preload(modules, threads=self.settings.threads, deep_each=deep_each)
            except PreloadRefused as refused:
                client.close()
                if refused.module is None and refused.whole and not deep_each:
                    # torch's bad-fork flag, read once at the end, names no import: once
                    # more with the flag read after each (slower), to drop only that one.
                    deep_each = True
                    continue
                if refused.module is None:
                    reason = refused.reason
                    break  # tainted before any import, or by the preload as a whole
                bad = refused.module
                dropped.append(Dropped(bad, refused.reason))
                # Its submodules would bring it back.
                modules = [m for m in modules if m != bad and not m.startswith(bad + ".")]
                continue
            self._clients = [client]
            for lane in range(1, self.lanes):
                other = self._new_client(lane)
                other.preload(modules, threads=self.settings.threads)  # what one server took, the others take
                self._clients.append(other)
            return PreloadReport(tuple(modules), tuple(dropped), time.perf_counter() - started, Isolation.FORK)
        raise ForkUnavailable(reason, tuple(dropped))
