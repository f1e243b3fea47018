"""How the MCP server calls shrinkgpu: each tool is the command it mirrors, run as a child
process (``python -m shrinkgpu COMMAND --json``), whose JSON is the tool's answer.

A child process, not the library in this process, for three reasons: what an agent gets
is exactly what ``--json`` prints (one format, documented in docs/outputs.md); stopping
it is a Ctrl-C, the path the reduction already takes to stop with its best result
written, marked partial (``Child.interrupt``: SIGINT, then a wait while it writes); and
the server holds no torch, no fork server and no state between calls but ``check``'s
cache, which is a file, and its jobs (agents/jobs.py).

A child runs in a session of its own, read by threads (stdout kept whole; stderr line by
line: ``--progress-json`` events, cli/progress.py, and the rest); a third thread waits
for its end, sweeps what is left of its process group, and hands over the ``Answer``.
Threads, not the server's event loop: a job outlives the tool call that started it, and
the server's exit must be able to stop it with no loop left to run.

Nothing here imports the ``mcp`` SDK (tests/agents/ test it without the extra).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from typing import IO, Callable, Mapping, Sequence, cast

# Seconds an interrupted command gets to write its best result before it is killed: the
# reduction writes the partial result, its report and case file, then stops its workers.
GRACE = 120.0
# Lines of the child's stderr kept (those that are not progress) for an error message.
TAIL_LINES = 20
# Seconds the readers get, after the child's exit, to take what is left in its pipes: a
# process outside its group may hold them open, and the answer must not wait for that.
READ_AFTER_EXIT = 5.0
# The variable that tells a child to stop with the server (``stop_with_parent``): the
# server's pid.  The CLI takes it out of its environment before the script sees any.
PARENT_VAR = "SHRINKGPU_MCP_PARENT"
PR_SET_PDEATHSIG = 1
# Exit codes of a command stopped by SIGINT, SIGHUP or SIGTERM: a reduction's best result
# so far is written, marked partial.
INTERRUPTED = (130, 129, 143)


class Refused(Exception):
    """The command ran, but its exit code is no answer (it failed, or was misused): the
    message says why, as the tool error does."""


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


def environment(changes: Mapping[str, str | None] | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``base`` (the server's) with ``changes`` over it, a None
    value taking that variable out.  The command hands it on to the script as the CLI
    hands on its own."""
    env = dict(os.environ if base is None else base)
    for name, value in (changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def event_of(line: str) -> dict | None:
    """A ``--progress-json`` event, or None for any other line."""
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


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


def answered(answer: Answer, ok: tuple[int, ...]) -> dict:
    """The command's JSON when its exit code is an answer (``ok``), else ``Refused``."""
    if answer.exit_code in ok:
        return answer.data
    raise Refused(f"shrinkgpu exited with {answer.exit_code}: {answer.error or 'no message'}")


class Child:
    """One command, running: started at once, in a session of its own; ``on_line`` gets
    each line of its stderr (from a reader thread), ``on_exit`` its ``Answer`` once it
    ended and its process group is gone (from the watcher thread)."""

    def __init__(self, argv: Sequence[str], *, on_line: Callable[[str], None], on_exit: Callable[[Answer], None],
                 cwd: str | None = None, env: Mapping[str, str] | None = None):
        self._on_line = on_line
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._reaped = False
        self._timer: threading.Timer | None = None
        self._ended = threading.Event()
        self._out: list[bytes] = []
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        # The server's pid: a child whose server dies without stopping it (SIGKILL) stops
        # itself as Ctrl-C would (stop_with_parent), so no job outlives its server.
        env = {**(os.environ if env is None else env), PARENT_VAR: str(os.getpid())}
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        # its stdout and stderr (pipes both: never None)
        self._pipes = (cast(IO[bytes], self.proc.stdout), cast(IO[bytes], self.proc.stderr))
        self.pid = self.proc.pid
        self._readers = [threading.Thread(target=self._collect, daemon=True, name="shrinkgpu-mcp-out"),
                         threading.Thread(target=self._follow, daemon=True, name="shrinkgpu-mcp-err")]
        for reader in self._readers:
            reader.start()
        threading.Thread(target=self._watch, daemon=True, name="shrinkgpu-mcp-watch").start()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it ended (and ``on_exit`` was called) within ``timeout``."""
        return self._ended.wait(timeout)

    def interrupt(self, grace: float | None = None) -> None:
        """SIGINT, as Ctrl-C (a reduction stops, writes its best result marked partial and
        closes its workers); its process group killed when it is not over within ``grace``
        seconds (``GRACE``)."""
        with self._lock:
            if self._reaped:
                return
            try:
                os.kill(self.pid, signal.SIGINT)
            except ProcessLookupError:
                return
            if self._timer is None:
                self._timer = threading.Timer(GRACE if grace is None else grace, self.kill)
                self._timer.daemon = True
                self._timer.start()

    def kill(self) -> None:
        """SIGKILL to its whole process group, while its leader is not reaped (after
        that, the group's number could be another's)."""
        with self._lock:
            if not self._reaped:
                _killpg(self.pid)

    def _collect(self) -> None:
        fd = self._pipes[0].fileno()
        while chunk := os.read(fd, 1 << 16):
            self._out.append(chunk)

    def _follow(self) -> None:
        for raw in self._pipes[1]:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if event_of(line) is None and line.strip():
                self._tail.append(line)
            self._on_line(line)

    def _watch(self) -> None:
        try:
            # Wait for the exit without reaping: the group's number stays the leader's
            # until the sweep below is done.
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        with self._lock:
            _killpg(self.pid)  # whatever it started in its group and left running
            code = self.proc.wait()
            self._reaped = True
            if self._timer is not None:
                self._timer.cancel()
        for reader, pipe in zip(self._readers, self._pipes):
            reader.join(READ_AFTER_EXIT)
            if not reader.is_alive():
                pipe.close()
        answer = parse_answer(code, b"".join(self._out).decode("utf-8", "replace"), "\n".join(self._tail))
        try:
            self._on_exit(answer)
        finally:
            self._ended.set()


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def stop_with_parent(value: str) -> None:
    """In a command the server started (``PARENT_VAR`` holds the server's pid): SIGINT to
    itself when the server dies, as Ctrl-C would, also when it dies by SIGKILL and
    cannot stop its jobs (Linux: ``PR_SET_PDEATHSIG``).  A server already gone is one
    that died before this ran.  A SIGINT ignored by inheritance is taken back first."""
    try:
        parent = int(value)
    except ValueError:
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Inherited across exec: a server started in the background by a non-interactive
        # shell (or under nohup) ignores SIGINT, and so would every command it starts;
        # the death signal would then stop nothing.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGINT)
