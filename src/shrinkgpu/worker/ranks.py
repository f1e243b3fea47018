"""Ranks: a job run as ``torchrun`` runs it on one machine.  ``Ranks`` makes each rank a run
of the executor it wraps (forked from the preloaded server: the candidates), with
torchrun's environment for its rank and a free port of the job's own for the store rank
0 hosts; ``Torchrun`` runs torchrun itself in a fresh interpreter, each rank the probe in
a fresh interpreter of its own (the original's fresh runs and the final checks: what
the user runs).

Their observations become one (``group.combine``): the first error of the job is the
root exception of the rank that failed first.  A rank that failed gives the others
``PEER_GRACE`` seconds to end on their own, then they are stopped, as torchrun stops
them.  Every rank notes the collective it waits in (probe/collectives.py), and the one
hang rule (``group.HangRule``) says when the job hangs; its first error is a ``Hang``
naming each rank and where it waits, and every rank is stopped.
"""

from __future__ import annotations

import dataclasses
import math
import re
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Sequence

from shrinkgpu.launch import Launch, rank_environment
from shrinkgpu.worker.executors import Executor, ExecutorSettings, FreshInterpreters, Job, PreloadReport
from shrinkgpu.worker.group import HangRule, bring_back_capture, combine, failed, in_collective, watch_group
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.probe.collectives import read_waiting
from shrinkgpu.worker.protocol import Finished, RunCommand, RunStatus, Watch

PEER_GRACE = 3.0  # seconds the other ranks get to end on their own after one failed
POLL = 0.2


def free_port() -> int:
    """A port on the loopback address nothing listens on now (the store rank 0 hosts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks(Executor):
    """Runs each job as ``launch.nproc`` ranks through ``inner``."""

    def __init__(self, inner: Executor, launch: Launch, *, grace: float = PEER_GRACE):
        self.inner = inner
        self.launch = launch
        self.isolation = inner.isolation
        self.hang_after = launch.hang_after
        self.grace = grace
        self._ports: set[int] = set()
        self._lock = threading.Lock()

    @property
    def lanes(self) -> int:  # type: ignore[override]
        return self.inner.lanes

    def start(self, preload: Sequence[str] = ()) -> PreloadReport:
        return self.inner.start(preload)

    @property
    def alive(self) -> bool:
        return self.inner.alive

    def close(self) -> None:
        self.inner.close()

    def cancel(self, future: Future) -> None:
        cancel = getattr(future, "cancel_ranks", None)
        if cancel is not None:
            cancel()

    def port(self) -> int:
        """A free port no job of this executor was given lately: candidates run side by side."""
        with self._lock:
            for _ in range(50):
                port = free_port()
                if port not in self._ports:
                    break
            self._ports.add(port)
            if len(self._ports) > 256:
                self._ports.clear()
            return port

    def submit(self, job: Job) -> Future:
        n = self.launch.nproc
        port = self.port()
        jobs = [rank_job(job, k, n, rank_environment(self.launch, k, port, job.env)) for k in range(n)]
        futures = [self.inner.submit(j) for j in jobs]
        if n == 1:
            return self._alone(futures[0])
        ended = [math.inf] * n
        for k, f in enumerate(futures):
            f.add_done_callback(lambda _f, k=k: ended.__setitem__(k, time.time()))
        result: Future = Future()
        stop = threading.Event()
        result.cancel_ranks = stop.set  # type: ignore[attr-defined]
        watcher = threading.Thread(target=self._watch, args=(job, jobs, futures, ended, result, stop),
                                   daemon=True, name="shrinkgpu-ranks")
        watcher.start()
        return result

    def _alone(self, future: Future) -> Future:
        """A world of one rank: its run is the job's (no peer to wait for or to stop)."""
        result: Future = Future()

        def done(f: Future) -> None:
            obs = f.result()
            result.set_result(dataclasses.replace(obs, world_size=1, rank=0 if failed(obs) else None))

        future.add_done_callback(done)
        return result

    def _watch(self, job: Job, jobs: list[Job], futures: list[Future], ended: list[float], result: Future,
               stop: threading.Event) -> None:
        started = time.monotonic()
        failed_at: float | None = None
        stopped: set[int] = set()
        hang = None
        rule = HangRule(self.hang_after)
        try:
            while not all(f.done() for f in futures):
                now = time.monotonic()
                if failed_at is None and any(f.done() and failed(f.result()) for f in futures):
                    failed_at = now
                hang = hang or rule.check(*self._waiting(jobs, futures), now=now)
                if stop.is_set() or hang is not None or (failed_at is not None and now - failed_at >= self.grace):
                    for k, f in enumerate(futures):
                        if not f.done():
                            stopped.add(k)
                            self.inner.cancel(f)
                wait([f for f in futures if not f.done()], timeout=POLL, return_when=FIRST_COMPLETED)
            observations = [in_collective(f.result(), j.request.watch.collectives, j.run.root)
                            for f, j in zip(futures, jobs)]
            obs = combine(observations, ended, stopped, hang, self.launch.nproc)
            if stopped:  # (a stopped rank's own wall is not the job's)
                obs = dataclasses.replace(obs, wall=max(obs.wall, time.monotonic() - started))
            relocate_capture(job.request.watch, jobs, obs.rank)
        except BaseException as exc:  # noqa: BLE001 - the job's observation, never a lost future
            obs = Observation.infrastructure(f"the ranks could not be run: {type(exc).__name__}: {exc}")
        result.set_result(obs)

    @staticmethod
    def _waiting(jobs: list[Job], futures: list[Future]) -> tuple[list[tuple[int, dict | None]], int]:
        """Where each running rank waits (None: in no collective), and how many ended."""
        waits, ended = [], 0
        for k, (j, f) in enumerate(zip(jobs, futures)):
            if f.done():
                ended += 1
                continue
            path = j.request.watch.collectives
            waits.append((k, read_waiting(path) if path else None))
        return waits, ended


def rank_job(job: Job, rank: int, world: int, env: dict[str, str]) -> Job:
    """``job`` for one rank: its own output, report and collectives file in a directory of
    its own within the run (one rank alone keeps the job's), its own copy of every path
    the watch writes to, and torchrun's variables for it."""
    run = job.run
    files = run if world == 1 else dataclasses.replace(run, path=run.path / f"rank-{rank}")
    if files is not run:
        files.path.mkdir(parents=True, exist_ok=True)
    watch = job.request.watch
    if world > 1:  # (one rank alone waits for no peer: nothing to note)
        watch = dataclasses.replace(watch.for_rank(rank), collectives=str(files.path / "collectives.json"))
    request = dataclasses.replace(job.request, observation=str(files.observation), crash_log=str(files.crash_log),
                                  watch=watch)
    return dataclasses.replace(job, request=request, run=files, env={**job.env, **env})


def relocate_capture(watch: Watch, jobs: list[Job], rank: int | None) -> None:
    """The call the first failing rank captured, where the job's watch asked for it."""
    if rank is not None and len(jobs) > 1:
        bring_back_capture(watch, jobs[rank].request.watch)


_TORCHRUN_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")


class Torchrun(FreshInterpreters):
    """torchrun itself (``python -m torch.distributed.run --standalone --nproc-per-node N
    --no-python python -c <probe>``), started by the supervisor like a fresh interpreter:
    each rank writes its own report, and what torchrun prints of a rank that died without
    one (``failed (exitcode: -6) local_rank: 0``) stands for it."""

    def __init__(self, settings: ExecutorSettings):
        super().__init__(settings)
        self.launch = settings.launch
        self._hangs: dict[Path, list[tuple[int, dict]]] = {}

    def _command(self, job: Job, run_id: int) -> RunCommand:
        watch = dataclasses.replace(job.request.watch, collectives=str(job.run.path / "collectives.json"))
        request = dataclasses.replace(job.request, per_rank=True, watch=watch)
        command = super()._command(dataclasses.replace(job, request=request), run_id)
        launch = self.launch
        # each rank's output in a file of its own (torchrun prints only its own lines)
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={launch.nproc}",
                    f"--role={launch.role}", f"--max-restarts={launch.max_restarts}",
                    f"--log-dir={job.run.path / 'ranks'}", "--redirects=3", "--no-python"]
        return dataclasses.replace(command, launcher=tuple(launcher))

    def submit(self, job: Job) -> Future:
        result = super().submit(job)
        watcher = threading.Thread(target=self._watch, args=(job, result), daemon=True, name="shrinkgpu-torchrun")
        watcher.start()
        return result

    def _watch(self, job: Job, result: Future) -> None:
        """Stop torchrun (and its ranks) when they hang (the one rule, worker/group.py)."""
        n = self.launch.nproc

        def read() -> tuple[list[tuple[int, dict | None]], int]:
            ended = [k for k in range(n) if Path(f"{job.run.observation}.rank{k}").exists()]
            waits = [(k, read_waiting(f"{job.run.path / 'collectives.json'}.rank{k}")) for k in range(n)
                     if k not in ended]
            return waits, len(ended)

        hang = watch_group(read, HangRule(self.launch.hang_after), result.done, POLL)
        if hang is not None:
            self._hangs[job.run.path] = hang
            self.cancel(result)

    def observation(self, event: Finished, job: Job) -> Observation:
        run, n = job.run, self.launch.nproc
        hang = self._hangs.pop(run.path, None)
        if hang is not None:
            event = dataclasses.replace(event, cancelled=False)  # stopped because it hangs: the ranks' reports stand
        streams = [self.streams(run, k) for k in range(n)]
        observations = [Observation.from_run(event, Path(f"{run.observation}.rank{k}"), *streams[k],
                                             crash_log=Path(f"{run.crash_log}.rank{k}"), root=run.root)
                        for k in range(n)]
        if event.error or event.cancelled:
            return observations[0]
        died = {int(rank): int(code) for code, rank in _TORCHRUN_FAILED.findall(_text(run.stderr))}
        for k, obs in enumerate(observations):
            code = died.get(k)
            if obs.status is RunStatus.NO_REPORT and code is not None and code < 0:
                # a rank killed by a signal (gloo's abort), as torchrun says
                dead = Finished(id=event.id, signal=-code, wall=event.wall)
                observations[k] = Observation.from_run(dead, Path(f"{run.observation}.rank{k}"), *streams[k],
                                                       crash_log=Path(f"{run.crash_log}.rank{k}"), root=run.root)
            observations[k] = in_collective(observations[k], f"{run.path / 'collectives.json'}.rank{k}", run.root)
        ended = [event.wall + k * 1e-6 for k in range(n)]
        return combine(observations, ended, set(), hang, n)

    @staticmethod
    def streams(run, rank: int) -> tuple[Path, Path]:
        """Rank ``rank``'s stdout and stderr, from torchrun's log directory (its own
        output alone); torchrun's merged streams when there are none."""
        found = sorted((run.path / "ranks").glob(f"*/attempt_*/{rank}/stderr.log"))
        if not found:
            return run.stdout, run.stderr
        return found[-1].with_name("stdout.log"), found[-1]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-65536:]
    except OSError:
        return ""
