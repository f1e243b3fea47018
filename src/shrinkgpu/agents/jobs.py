"""The jobs of ``shrinkgpu mcp``: a command started without waiting for it (``wait:
false``), watched with the ``job`` tool and stopped with ``cancel``; a call that waits is
a job too, watched by the call itself, so both answer the same.

Agent clients cut a tool call at 60 s by default, and a reduction takes minutes: a job
is the command's child process (agents/calls.py) kept in the server's ``Registry``, with
what its events said folded into a ``Progress`` by the child's reader thread.  Its
``cursor`` counts the changes an agent waits for (a stage, the program the search starts
from, a smaller program, the end), so that ``job`` with ``wait_s`` returns when there is
something to read, not every time a candidate is tested.

Pure bookkeeping under one lock; no SDK, no event loop (tests/agents/test_jobs.py).
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Callable, Mapping, Sequence

from shrinkgpu.agents.calls import (
    GRACE,
    INTERRUPTED,
    READ_AFTER_EXIT,
    Answer,
    Child,
    Refused,
    event_of,
    progress_message,
)

# The longest a ``job`` call may wait for a change: well under the 60 s at which clients
# cut a call.
WAIT_LIMIT = 30.0
# Events that move a job's cursor.  Not ``tested``, ``pass`` or ``improved``: a fork
# server tests dozens of candidates a second, and a wait that each of them ends spins.
NOTABLE = frozenset({"stage", "reducing", "best"})
# How a command that prints no ``--progress-json`` says what it does (``check``'s stages).
STAGE_PREFIX = "shrinkgpu: "


class State(str, Enum):
    RUNNING = "running"
    DONE = "done"          # the command answered
    FAILED = "failed"      # it ran, but its exit code is no answer (``error`` says why)
    CANCELLED = "cancelled"  # stopped by ``cancel`` or the server's exit; a reduction's best result is kept


@dataclass(frozen=True)
class Progress:
    """What a job's command has said so far: its phase (its last stage, in its words),
    the search's pass, the size of the program the search started from and of the best
    one so far (with its files), the candidates tested and accepted."""

    phase: str = "starting"
    pass_name: str | None = None
    start_tokens: int | None = None
    best_tokens: int | None = None
    best_lines: int | None = None
    best_main: str | None = None
    best_files: Mapping[str, str] | None = field(default=None, compare=False)
    tested: int = 0
    accepted: int = 0

    def to_json(self, text: bool = False) -> dict:
        out: dict = {"phase": self.phase, "pass": self.pass_name, "start_tokens": self.start_tokens,
                     "best_tokens": self.best_tokens, "best_lines": self.best_lines, "tested": self.tested,
                     "accepted": self.accepted}
        if text and self.best_files is not None:
            out["text"] = self.best_files.get(self.best_main or "")
            if len(self.best_files) > 1:
                out["files"] = dict(self.best_files)
        return out


def advance(progress: Progress, event: Mapping[str, object]) -> Progress:
    """``progress`` after one ``--progress-json`` event."""
    kind = event.get("event")
    if kind == "stage":
        return replace(progress, phase=str(event.get("message", "")))
    if kind == "pass":
        return replace(progress, pass_name=str(event.get("name")))
    if kind == "reducing":
        return replace(progress, start_tokens=_int(event.get("tokens")))
    if kind == "best":
        files = event.get("files")
        return replace(progress, best_tokens=_int(event.get("tokens")), best_lines=_int(event.get("lines")),
                       best_main=str(event.get("main")) if event.get("main") else progress.best_main,
                       best_files=dict(files) if isinstance(files, dict) else progress.best_files)
    if kind == "tested":
        return replace(progress, tested=_int(event.get("tests")) or 0, accepted=_int(event.get("accepted")) or 0)
    return progress


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


class Job:
    """One command started by a tool: its state, progress and cursor, what it answered
    (``result``, shaped by ``shape`` as the waiting call answers) or why not (``error``).
    ``on_line`` and ``on_exit`` are called from its child's threads."""

    def __init__(self, job_id: str, tool: str, shape: Callable[[Answer], dict],
                 clock: Callable[[], float] = time.monotonic):
        self.id = job_id
        self.tool = tool
        self.shape = shape
        self.clock = clock
        self.started = clock()
        self.ended_at: float | None = None
        self.state = State.RUNNING
        self.progress = Progress()
        self.cursor = 0
        self.said: list[tuple[float, str]] = []  # (seconds, message): the waiting call's notifications
        self.result: dict | None = None
        self.error: str | None = None
        self.exit_code: int | None = None
        self.cancelled = False
        self.child: Child | None = None
        self._changed = threading.Condition()

    def attach(self, child: Child) -> None:
        self.child = child

    # -- from the child's threads ---------------------------------------------------------
    def on_line(self, line: str) -> None:
        event = event_of(line)
        with self._changed:
            if event is not None:
                self.progress = advance(self.progress, event)
                message = progress_message(event)
                if message is not None:
                    self.said.append((float(event.get("seconds") or 0.0), message))
                if event.get("event") in NOTABLE:
                    self.cursor += 1
            elif line.startswith(STAGE_PREFIX):
                message = line[len(STAGE_PREFIX):]
                self.progress = replace(self.progress, phase=message)
                self.said.append((self.clock() - self.started, message))
                self.cursor += 1
            self._changed.notify_all()

    def on_exit(self, answer: Answer) -> None:
        try:
            result, error = self.shape(answer), None
        except Refused as exc:
            result, error = None, str(exc)
        except Exception as exc:  # (raised in the watcher thread, it would be lost, and the job never end)
            result, error = None, f"shrinkgpu answered, but reading its answer failed: {exc!r}"
        with self._changed:
            stopped = self.cancelled and (answer.exit_code in INTERRUPTED or answer.exit_code < 0)
            self.state = State.CANCELLED if stopped else State.DONE if error is None else State.FAILED
            self.result, self.error, self.exit_code = result, error, answer.exit_code
            self.ended_at = self.clock()
            self.cursor += 1
            self._changed.notify_all()

    # -- from the server ------------------------------------------------------------------
    def cancel(self, grace: float | None = None) -> bool:
        """Stop it as Ctrl-C does; False when it is over already."""
        with self._changed:
            if self.state is not State.RUNNING:
                return False
            if self.cancelled:
                return True  # (a second SIGINT could cut short the writing of its result)
            self.cancelled = True
            self.cursor += 1
            self._changed.notify_all()
        if self.child is not None:
            self.child.interrupt(grace)
        return True

    @property
    def running(self) -> bool:
        return self.state is State.RUNNING

    def wait(self, cursor: int | None, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds, never over ``WAIT_LIMIT``) until the cursor
        is past ``cursor`` (None: the one it has now) or the job is over; whether it is."""
        with self._changed:
            since = self.cursor if cursor is None else cursor
            return self._changed.wait_for(lambda: self.cursor != since or not self.running,
                                          max(0.0, min(timeout, WAIT_LIMIT)))

    def wait_said(self, seen: int, timeout: float) -> tuple[list[tuple[float, str]], bool]:
        """The messages after the first ``seen``, once there is one or the job is over
        (or ``timeout`` passed), and whether it is over."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.said) > seen or not self.running, timeout)
            return self.said[seen:], not self.running

    def wait_end(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: not self.running, timeout)

    def outcome(self) -> dict:
        """What the waiting call answers: the result, or ``Refused`` with the error."""
        with self._changed:
            if self.running:
                raise Refused(f"job {self.id} is still running")
            if self.result is None:
                raise Refused(self.error or "no answer")
            return self.result

    def view(self, text: bool = False) -> dict:
        """What ``job`` answers: the state, the cursor to wait past, the seconds, the
        progress (with the best program's text on request) and, once over, the result
        (exactly what the waiting call answers) or the error."""
        with self._changed:
            seconds = (self.ended_at if self.ended_at is not None else self.clock()) - self.started
            out: dict = {"job": self.id, "tool": self.tool, "state": self.state.value, "cursor": self.cursor,
                         "seconds": round(seconds, 1), "progress": self.progress.to_json(text)}
            if self.running and self.cancelled:
                out["cancelling"] = True
            if self.result is not None:
                out["result"] = self.result
            if self.error is not None:
                out["error"] = self.error
            return out


Spawn = Callable[..., Child]


class Registry:
    """The server's jobs, by id.  ``stop_all`` at the server's exit: no job outlives it."""

    def __init__(self, spawn: Spawn = Child):
        self.spawn = spawn
        self._jobs: dict[str, Job] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self.closed = False

    def start(self, tool: str, argv: Sequence[str], shape: Callable[[Answer], dict], *, cwd: str | None = None,
              env: Mapping[str, str] | None = None) -> Job:
        with self._lock:
            if self.closed:
                raise Refused("the server is stopping: no new job")
            job = Job(f"{tool}-{next(self._numbers)}", tool, shape)
            try:
                child = self.spawn(argv, on_line=job.on_line, on_exit=job.on_exit, cwd=cwd, env=env)
            except OSError as exc:
                raise Refused(f"could not start shrinkgpu {tool}: {exc}") from None
            job.attach(child)
            self._jobs[job.id] = job
        return job

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
            known = ", ".join(self._jobs) or "none"
        if job is None:
            raise Refused(f"no job {job_id!r} in this server (its jobs: {known}); a job lives as long as the "
                          "server that started it")
        return job

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def stop_all(self, grace: float | None = None) -> list[Job]:
        """Every running job interrupted at once, then waited for while it writes its
        best result (each one's process group killed after ``grace``); the jobs stopped.
        No job starts after this."""
        with self._lock:
            self.closed = True
        stopping = [job for job in self.jobs() if job.cancel(grace)]
        limit = (GRACE if grace is None else grace) + READ_AFTER_EXIT + 5.0
        for job in stopping:
            job.wait_end(limit)
        return stopping
