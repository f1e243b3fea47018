"""The printers that show a reduction's progress events (reducer/events.py) with the
core's: plain lines off a terminal, one live status line on one, or JSON lines for a
program that drives shrinkgpu (``--progress-json``: the MCP server reads them)."""

from __future__ import annotations

import json
import sys
import time
from typing import TextIO

from shrinkgpu.core import Improved, PassStarted, Tested
from shrinkgpu.reducer.events import BestSoFar, Reducing, Stage


class ProgressPrinter:
    """Plain progress lines on a stream (when it is not a terminal): the stages,
    a status line every few seconds, and with ``verbose`` every accepted edit.  Sizes
    are tokens of the program, counted as people count them."""

    def __init__(self, stream: TextIO = sys.stderr, heartbeat: float = 5.0, verbose: bool = False):
        self.stream = stream
        self.heartbeat = heartbeat
        self.verbose = verbose
        self.started = time.monotonic()
        self._last = time.monotonic()
        self.pass_name = ""
        self.tested = 0
        self.accepted = 0
        self.tokens: int | None = None
        self.lines: int | None = None
        self.tokens_start: int | None = None

    def __call__(self, event: object) -> None:
        if isinstance(event, Stage):
            self.stage(event.message)
        elif isinstance(event, PassStarted):
            self.pass_name = event.name
        elif isinstance(event, Tested):
            self.tested = event.tests
            self.accepted += event.verdict.interesting
            self.tick()
        elif isinstance(event, BestSoFar):
            before = self.tokens
            self.tokens = event.tokens
            self.lines = sum(text.count("\n") for text in event.files.values())
            if self.tokens_start is None:
                self.tokens_start = before if before is not None else event.tokens
            if self.verbose and before is not None:
                self._print(f"{self.pass_name}: {before} -> {event.tokens} tokens ({self.tested} candidates)")
            self.tick()
        elif isinstance(event, Reducing):
            self.tokens = self.tokens_start = event.tokens
            self.lines = sum(text.count("\n") for text in event.files.values())

    def status(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.tested / elapsed if elapsed > 0 else 0.0
        size = "-" if self.tokens is None else f"{self.tokens} tokens, {self.lines or '?'} lines"
        return (f"{self.pass_name or 'starting'} | {size} | {self.tested} candidates, {self.accepted} accepted | "
                f"{rate:.1f}/s | {_clock(elapsed)}")

    def stage(self, message: str) -> None:
        self._print(message)

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.heartbeat:
            self._print(self.status())

    def close(self) -> None:
        pass

    def _print(self, message: str) -> None:
        self._last = time.monotonic()
        print(f"shrinkgpu: {message}", file=self.stream, flush=True)


class LiveProgress(ProgressPrinter):
    """On a terminal: the stages as lines, under them one live status line (rich) with
    the pass, the size in tokens and lines, candidates run and accepted, the rate and the
    time elapsed."""

    def __init__(self, verbose: bool = False):
        from rich.console import Console
        from rich.live import Live

        super().__init__(heartbeat=0.25, verbose=verbose)
        self.console = Console(stderr=True, highlight=False)
        self.live = Live(console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def stage(self, message: str) -> None:
        self.console.print(f"shrinkgpu: {message}", markup=False)

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.heartbeat:
            self._last = time.monotonic()
            from rich.text import Text

            self.live.update(Text("shrinkgpu ▸ " + self.status(), style="bold"))

    def _print(self, message: str) -> None:
        self.console.print(f"shrinkgpu: {message}", markup=False)

    def close(self) -> None:
        self.live.stop()


class JsonProgress:
    """Each event as one JSON object a line (``--progress-json``), with ``seconds`` since
    the start: ``stage`` (``message``), ``reducing`` and ``best`` (``tokens``, ``lines``;
    ``best`` also ``main`` and ``files``, the program's text),
    ``pass`` (``name``, ``level``, ``units``), ``improved`` (``pass``) and ``tested``
    (``tests``, ``accepted``; at most one every ``every`` seconds: a fork server tests
    dozens a second)."""

    def __init__(self, stream: TextIO = sys.stderr, every: float = 0.5):
        self.stream = stream
        self.every = every
        self.started = time.monotonic()
        self._last_tested = float("-inf")
        self.accepted = 0

    def __call__(self, event: object) -> None:
        if isinstance(event, Stage):
            self.stage(event.message)
        elif isinstance(event, Reducing):
            self._write("reducing", tokens=event.tokens, lines=sum(t.count("\n") for t in event.files.values()))
        elif isinstance(event, BestSoFar):
            # With its files: the server shows the best program so far to an agent that
            # asks, whatever the output path and however often the partial writer writes.
            self._write("best", tokens=event.tokens, lines=sum(t.count("\n") for t in event.files.values()),
                        main=event.main, files=dict(event.files))
        elif isinstance(event, PassStarted):
            self._write("pass", name=event.name, level=event.level, units=event.units)
        elif isinstance(event, Improved):
            self._write("improved", **{"pass": event.name})
        elif isinstance(event, Tested):
            self.accepted += event.verdict.interesting
            if time.monotonic() - self._last_tested >= self.every:
                self._last_tested = time.monotonic()
                self._write("tested", tests=event.tests, accepted=self.accepted)

    def stage(self, message: str) -> None:
        self._write("stage", message=message)

    def close(self) -> None:
        pass

    def _write(self, event: str, **fields) -> None:
        line = {"event": event, "seconds": round(time.monotonic() - self.started, 3), **fields}
        print(json.dumps(line), file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}"
