"""What a reduction says while it runs: its own progress events (the core emits the
rest: ``PassStarted``, ``Tested``, ``Improved``) and ``Talk``, the one way every phase
says something (an event to the listeners, a note for the report, a line every so
often while a long run goes on)."""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass, field
from typing import Callable

from shrinkgpu.worker import Observation

# Seconds between "still running" lines while a long run goes on.
HEARTBEAT = 30.0


@dataclass(frozen=True)
class Stage:
    """A progress line of the reduction itself."""

    message: str


@dataclass(frozen=True)
class Reducing:
    """The search starts on a program of this many tokens."""

    files: dict
    main: str
    tokens: int


@dataclass(frozen=True)
class BestSoFar:
    """The search accepted a smaller program (after the core's ``Improved``)."""

    files: dict
    main: str
    tokens: int


Listener = Callable[[object], None]


@dataclass
class Talk:
    """The listeners a reduction's events go to (the partial writer, the pass
    statistics, the caller's progress printer) and the notes its report keeps, in the
    order they were made."""

    listeners: list[Listener] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    heartbeat: float = HEARTBEAT

    def emit(self, event: object) -> None:
        for listener in self.listeners:
            listener(event)

    def stage(self, message: str) -> None:
        self.emit(Stage(message))

    def note(self, message: str, *, show: bool = True) -> None:
        """A fact for the report's notes; ``show``: the user sees it now too."""
        self.notes.append(message)
        if show:
            self.emit(Stage(message))

    def wait(self, future: concurrent.futures.Future, saying: str,
             where: Callable[[], str] | None = None) -> Observation:
        """The future's observation, with a line ``saying`` it is still running every
        ``heartbeat`` seconds (``where()``: how far it is, when that can be told)."""
        started = time.monotonic()
        while True:
            try:
                return future.result(timeout=self.heartbeat)
            except concurrent.futures.TimeoutError:
                minutes, seconds = divmod(int(time.monotonic() - started), 60)
                self.stage(f"{saying} ({minutes}:{seconds:02d}{where() if where is not None else ''})")
