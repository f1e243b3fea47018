"""Loops around the failure: which iteration each was in (a line tracer), and where
the run's time went (a sampling thread).  Only in runs that ask (``Watch.count_loops``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from shrinkgpu.worker.probe.paths import is_user_file


def loop_spans(filename: str, roots, *, whiles: bool) -> list[tuple[int, int, int]]:
    """(header line, first body line, last line) of each ``for`` loop (and ``while``,
    with ``whiles``) of one of the user's files; none for a library's or an unreadable
    file."""
    if not is_user_file(filename, roots):
        return []
    import ast

    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    kinds = (ast.For, ast.While) if whiles else (ast.For,)
    return [
        (node.lineno, node.body[0].lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree) if isinstance(node, kinds) and node.body
    ]


class LoopCounter:
    """Which iteration each ``for`` loop of the user's code is in, per frame.

    A line tracer, on for the original's first run only (``count_loops``): it costs a
    Python call per line of user code.  A loop's header line gets a line event when the
    loop is entered and again at each jump back from its body, so the iteration is the
    number of jumps back since the last entry (a header spread over several lines gets
    events for its other lines too; those are neither)."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.loops: dict[str, dict[int, tuple[int, int]]] = {}  # file -> header line -> (body start, end)
        self.state: dict[int, list[Any]] = {}  # id(frame) -> [previous line, {header: iteration}]
        self.raising: set[int] = set()
        self._headers: dict[Any, bool] = {}  # code object -> whether a loop's header is its own line
        self.calls: dict[Any, int] = {}  # code object -> how many frames of it were entered

    def _loops_of(self, filename: str) -> dict[int, tuple[int, int]]:
        found = self.loops.get(filename)
        if found is None:
            found = {head: (start, end) for head, start, end in loop_spans(filename, self.roots, whiles=False)}
            self.loops[filename] = found
        return found

    def install(self) -> None:
        sys.settrace(self._call)

    def _call(self, frame, event, arg):
        code = frame.f_code
        holds = self._headers.get(code)
        if holds is None:
            # Only the frames of code whose own lines hold a loop's header are traced: a
            # model's ``forward`` without a loop, called thousands of times from the
            # training loop in the same file, runs untraced (each traced line costs a
            # Python call).
            loops = self._loops_of(code.co_filename)
            holds = self._headers[code] = bool(loops) and any(
                line in loops for _start, _end, line in code.co_lines() if line is not None)
        if not holds:
            return None
        # (a generator's frame is entered again at each resume, and counted again: the
        # state tracer counts the same way)
        n = self.calls[code] = self.calls.get(code, 0) + 1
        self.state[id(frame)] = [0, {}, n]  # a new frame (ids of dead ones get reused)
        return self._local

    def _local(self, frame, event, arg):
        key = id(frame)
        if event == "line":
            self.raising.discard(key)
            state = self.state.get(key)
            if state is None:
                return self._local
            line = frame.f_lineno
            loops = self.loops.get(frame.f_code.co_filename, {})
            span = loops.get(line)
            if span is not None:
                prev = state[0]
                body_start, end = span
                if body_start <= prev <= end:
                    state[1][line] = state[1].get(line, 0) + 1  # back from the body
                elif not (line <= prev < body_start):
                    state[1][line] = 0  # entered
            state[0] = line
        elif event == "exception":
            self.raising.add(key)
        elif event == "return":
            if key not in self.raising:
                self.state.pop(key, None)
        return self._local

    def at(self, frames: list[tuple[Any, int]], rel) -> list[list[Any]]:
        """[file, header line, iteration, call] for the loops around each (frame, line);
        ``call``: which frame of its function (or module) it was, counting from 1."""
        out = []
        for frame, line in frames:
            state = self.state.get(id(frame))
            if state is None:
                continue
            filename = frame.f_code.co_filename
            loops = self.loops.get(filename, {})
            for header, iteration in sorted(state[1].items()):
                body_start, end = loops.get(header, (0, -1))
                if body_start <= line <= end:
                    out.append([rel(filename), header, iteration, state[2]])
        return out


class LoopClock:
    """Where the run's time goes, by loop: a thread that looks at the main thread's stack
    every few milliseconds and counts, for each ``for``/``while`` of the user's code that
    a frame is inside, one sample.  On with ``count_loops`` only (the original's first
    run), beside the line tracer: the shares are of a traced run, which slows Python-heavy
    loops more than tensor-heavy ones; they rank loops, they are not timings.

    A sampling thread rather than a profiling signal: a signal interrupts the script's own
    system calls, which some C extensions do not retry."""

    INTERVAL = 0.005

    def __init__(self, roots: tuple[str, ...], rel):
        import threading

        self.roots = roots
        self.rel = rel
        self.samples = 0
        self.hits: dict[tuple[str, int], int] = {}
        self.spans: dict[str, list[tuple[int, int, int]]] = {}  # file -> (header, body start, end)
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shrinkgpu-loop-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[list[Any]]:
        """[file, header line, share of the samples] for loops that got any, largest first."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        if not self.samples:
            return []
        ranked = sorted(self.hits.items(), key=lambda kv: -kv[1])
        return [[file, line, round(n / self.samples, 4)] for (file, line), n in ranked[:32]]

    def _spans_of(self, filename: str) -> list[tuple[int, int, int]]:
        found = self.spans.get(filename)
        if found is None:
            found = loop_spans(filename, self.roots, whiles=True)
            self.spans[filename] = found
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            frame = sys._current_frames().get(self._main)
            self.samples += 1
            seen = set()
            while frame is not None:
                filename = frame.f_code.co_filename
                line = frame.f_lineno
                for header, body_start, end in self._spans_of(filename):
                    if header <= line <= end:
                        seen.add((self.rel(filename), header))
                frame = frame.f_back
            for key in seen:
                self.hits[key] = self.hits.get(key, 0) + 1
            del frame
