"""How the MCP server calls shrinkgpu: each tool is the command it mirrors, run as a child
process (``python -m shrinkgpu COMMAND --json``), whose JSON is the tool's answer.

A child process, not the library in this process, for three reasons: what an agent gets
is exactly what ``--json`` prints (one format, documented in docs/outputs.md); a
cancelled call is a Ctrl-C, the path the reduction already takes to stop with its best
result written, marked partial (``interrupt``: SIGINT to the child, then a wait while it
writes); and the server holds no torch, no fork server and no state between calls but
``check``'s cache, which is a file.

A reduction's progress comes from ``--progress-json`` (cli/progress.py: one JSON object
a line on stderr); ``progress_message`` says each in words for the protocol's progress
notifications, whose value is the seconds since the start (``--max-time`` is the total).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping, Sequence

import anyio

# Seconds an interrupted command gets to write its best result before it is killed: the
# reduction writes the partial result, its report and case file, then stops its workers.
GRACE = 120.0
# Lines of the child's stderr kept (those that are not progress) for an error message.
TAIL_LINES = 20

# (seconds since the start, what happened) -> a progress notification
Report = Callable[[float, str], Awaitable[None]]


@dataclass(frozen=True)
class Answer:
    """What a command said: its exit code, its ``--json`` object, and the last lines of
    its stderr that were not progress."""

    exit_code: int
    data: dict
    tail: str

    @property
    def error(self) -> str | None:
        return self.data.get("error") or (self.tail.strip().splitlines()[-1] if self.tail.strip() else None)


def command(name: str, options: Sequence[str], positionals: Sequence[str], args: Sequence[str] = ()) -> list[str]:
    """The command line of ``shrinkgpu NAME`` with ``--json``: options, then the
    positional arguments, then the script's own arguments after ``--``."""
    line = [sys.executable, "-m", "shrinkgpu", name, *options, "--json", *positionals]
    return [*line, "--", *args] if args else line


def options(**values: object) -> list[str]:
    """Command-line options from keyword arguments: ``max_time=30`` -> ``--max-time 30``;
    True -> the bare flag; None and False -> nothing; a name ending in ``_`` loses it."""
    out: list[str] = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        flag = "--" + name.rstrip("_").replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def progress_message(event: Mapping[str, object]) -> str | None:
    """A ``--progress-json`` event in words, or None for one not worth a notification."""
    kind = event.get("event")
    if kind == "stage":
        return str(event.get("message", ""))
    if kind == "reducing":
        return f"reducing {event.get('tokens')} tokens"
    if kind == "best":
        return f"best so far: {event.get('tokens')} tokens, {event.get('lines')} lines"
    if kind == "improved":
        return f"{event.get('pass')} made the program smaller"
    if kind == "tested":
        return f"{event.get('tests')} candidates tested, {event.get('accepted')} accepted"
    return None


def parse_answer(code: int, stdout: str, tail: str) -> Answer:
    """The command's JSON (the last object it printed), or an error object when it
    printed none."""
    text = stdout.strip()
    data: dict | None = None
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            start = text.rfind("\n{")
            try:
                data = json.loads(text[start + 1:]) if start >= 0 else None
            except ValueError:
                data = None
    if not isinstance(data, dict):
        last = tail.strip().splitlines()[-1] if tail.strip() else f"exit code {code}"
        data = {"error": f"shrinkgpu printed no JSON: {last}", "exit_code": code}
    return Answer(code, data, tail)


async def call(argv: Sequence[str], *, cwd: str | None = None, report: Report | None = None,
               env: Mapping[str, str] | None = None) -> Answer:
    """Run ``argv`` to its end, its progress events to ``report``.  Cancelled (the client
    cancelled the call, or the server is going away), the child is interrupted as Ctrl-C
    would, and given ``GRACE`` seconds to write its best result before the cancellation
    goes on."""
    proc = await anyio.open_process(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd, env=dict(env) if env is not None else None,
                                    start_new_session=True)
    out: list[bytes] = []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(collect, proc.stdout, out)
            await follow(proc.stderr, tail, report)
        code = await proc.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await interrupt(proc)
        raise
    return parse_answer(code, b"".join(out).decode("utf-8", "replace"), "\n".join(tail))


async def collect(stream, out: list[bytes]) -> None:
    async for chunk in stream:
        out.append(chunk)


async def follow(stream, tail: deque, report: Report | None) -> None:
    """The child's stderr, line by line: progress events to ``report``, the rest kept."""
    pending = b""
    async for chunk in stream:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            await said(raw.decode("utf-8", "replace"), tail, report)
    if pending:
        await said(pending.decode("utf-8", "replace"), tail, report)


async def said(line: str, tail: deque, report: Report | None) -> None:
    event = None
    if line.startswith("{"):
        try:
            event = json.loads(line)
        except ValueError:
            event = None
    if not isinstance(event, dict) or "event" not in event:
        if line.strip():
            tail.append(line)
        return
    message = progress_message(event)
    if message is not None and report is not None:
        await report(float(event.get("seconds") or 0.0), message)


async def interrupt(proc) -> None:
    """SIGINT to the child (a reduction stops, writes its best result marked partial and
    closes its workers), its pipes drained while it does, then SIGKILL to its process
    group when it takes longer than ``GRACE``."""
    if proc.returncode is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
    except ProcessLookupError:
        return
    async with anyio.create_task_group() as group:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                group.start_soon(drain, stream)
        with anyio.move_on_after(GRACE):
            await proc.wait()
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            await proc.wait()
        group.cancel_scope.cancel()


async def drain(stream) -> None:
    try:
        async for _ in stream:
            pass
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
