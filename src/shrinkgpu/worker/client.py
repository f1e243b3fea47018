"""Client side of the supervisor: start it, send it work, turn its events into futures.

Runs in the reducer's process.  One reader thread owns the event pipe; everything else
is the caller's thread.  Commands and events are the typed messages of
``worker/protocol.py``.  If the supervisor dies, every pending future fails with
``SupervisorGone`` (an infrastructure failure, never a verdict on a candidate).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Sequence

from shrinkgpu.worker.protocol import (
    CancelCommand,
    Event,
    Finished,
    PreloadCommand,
    Preloaded,
    PreloadRefusal,
    Ready,
    RunCommand,
    event_from_json,
)

# how long a supervisor whose pipes closed is given to finish exiting
REAP_SECONDS = 5.0


class SupervisorGone(RuntimeError):
    pass


class PreloadRefused(RuntimeError):
    def __init__(self, module: str | None, reason: str, whole: bool = False):
        super().__init__(f"preloading {module or 'nothing'}: {reason}")
        self.module = module
        self.reason = reason
        self.whole = whole  # found once everything was imported: no one import named


class SupervisorClient:
    def __init__(
        self, *, env: Mapping[str, str] | None = None, python: str = sys.executable, unset: Sequence[str] = ()
    ):
        """``unset``: variables the supervisor itself needs (a hash seed) that its
        candidates must not see."""
        self.env = dict(os.environ if env is None else env)
        self.unset = tuple(unset)
        self.python = python
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[Any, Future] = {}
        self._proc: subprocess.Popen | None = None
        self._cmd_w: int | None = None
        self._reader: threading.Thread | None = None
        self._ready: Future = Future()
        self._log = tempfile.TemporaryFile()
        self.pid: int | None = None

    def start(self, timeout: float = 60.0) -> None:
        cmd_r, cmd_w = os.pipe()
        evt_r, evt_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [self.python, "-m", "shrinkgpu.worker.supervisor", str(cmd_r), str(evt_w), *self.unset],
                pass_fds=(cmd_r, evt_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env=self.env,
                # Its own session: Ctrl-C at the terminal reaches the reducer, which
                # then shuts the supervisor down in order.
                start_new_session=True,
            )
        finally:
            os.close(cmd_r)
            os.close(evt_w)
        self._cmd_w = cmd_w
        self._reader = threading.Thread(target=self._read, args=(evt_r,), daemon=True, name="shrinkgpu-events")
        self._reader.start()
        ready: Ready = self._ready.result(timeout=timeout)
        self.pid = ready.pid
        self.subreaper = ready.subreaper

    # -- events ---------------------------------------------------------------------
    def _read(self, fd: int) -> None:
        buffer = b""
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = event_from_json(json.loads(line))
                        if event is not None:
                            self._dispatch(event)
        finally:
            os.close(fd)
            self._reap()
            gone = SupervisorGone(f"the supervisor process exited{self._log_tail()}")
            if not self._ready.done():
                self._ready.set_exception(gone)
            with self._lock:
                pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(gone)

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Ready):
            self._ready.set_result(event)
            return
        if isinstance(event, (Preloaded, PreloadRefusal)):
            key: Any = "preload"
        elif isinstance(event, Finished):
            key = event.id
        else:
            return  # Started and diagnostics need no answer
        with self._lock:
            fut = self._pending.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(event)

    def _log_tail(self) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 4000))
            text = self._log.read().decode(errors="replace").strip()
        except Exception:
            return ""
        return f"; its last words:\n{text}" if text else ""

    # -- commands -------------------------------------------------------------------
    def _send(self, cmd: RunCommand | PreloadCommand | CancelCommand) -> None:
        if self._cmd_w is None:
            raise SupervisorGone("the supervisor is not running")
        data = (json.dumps(cmd.to_json()) + "\n").encode()
        try:
            while data:
                n = os.write(self._cmd_w, data)
                data = data[n:]
        except (BrokenPipeError, OSError) as exc:
            self._reap()
            raise SupervisorGone(f"the supervisor process exited{self._log_tail()}") from exc

    def _reap(self) -> None:
        """Its pipes close a moment before the kernel has it exited: wait for that, so
        that whoever hears it is gone sees ``alive`` false (and its exit status)."""
        proc = self._proc  # (close() may clear it from the main thread meanwhile)
        if proc is None:
            return
        try:
            proc.wait(timeout=REAP_SECONDS)
        except (subprocess.TimeoutExpired, OSError):
            pass  # (a supervisor that closed its pipes and lives on: close() ends it)

    def preload(self, modules: Sequence[str], timeout: float = 600.0, threads: int | None = None,
                deep_each: bool = False) -> Preloaded:
        """Import ``modules`` in the supervisor, then size its thread pools to ``threads``
        (None: as loaded) for every forked child; ``deep_each``: see ``PreloadCommand``."""
        fut: Future = Future()
        with self._lock:
            self._pending["preload"] = fut
        self._send(PreloadCommand(tuple(modules), threads, deep_each))
        event = fut.result(timeout=timeout)
        if isinstance(event, PreloadRefusal):
            raise PreloadRefused(event.module, event.reason, event.whole)
        return event

    def submit(self, make: Callable[[int], RunCommand]) -> Future:
        """Send the run command ``make(id)`` builds for the id this client gives it; the
        future gets its ``Finished`` event."""
        fut: Future = Future()
        with self._lock:
            run_id = next(self._ids)
            self._pending[run_id] = fut
        self._send(make(run_id))
        return fut

    def cancel(self, run_id: int) -> None:
        """Stop run ``run_id`` (its future gets a ``Finished`` that says ``cancelled``)."""
        try:
            self._send(CancelCommand(run_id))
        except SupervisorGone:
            pass  # gone with everything it ran

    def close(self) -> None:
        if self._cmd_w is not None:
            try:
                os.close(self._cmd_w)  # EOF: the supervisor kills what runs and exits
            except OSError:
                pass
            self._cmd_w = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._log.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None
