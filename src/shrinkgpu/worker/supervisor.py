"""The supervisor: one long-lived process that starts, watches and cleans up candidates.

Every candidate is a child of this process, in a session (process group) of its own,
so one ``killpg`` ends it with everything it started.  On Linux the supervisor is also
a *child subreaper*: a grandchild that escapes its group (``setsid``, double fork) is
re-parented here instead of to init, and is killed once its candidate is over.  No
process outlives a run.

Two ways to start a candidate, chosen per run:

* ``fork``: the supervisor has imported torch and the modules the original run
  imported (``preload``), and forks.  The child starts with everything imported, in a
  few milliseconds instead of seconds.  This is only sound while nothing in the
  supervisor has called into CUDA and no thread would be running at the fork
  (``forksafety``; docs/executors.md).  ``preload`` checks both after every import and
  refuses (naming the module) rather than go on tainted.
* ``fresh``: the child ``exec``s a new interpreter running the probe.

It speaks newline-delimited JSON over two pipes it is given (never stdin/stdout: an
imported module may print at import time), and stops when its command pipe closes.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

from shrinkgpu.worker.forksafety import fork_hazard

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXIT_CHILD_SETUP_FAILED = 71
# ``-c`` rather than ``-m``: the probe is then imported as itself, and ``__main__`` is
# left for the user's script alone.
FRESH_COMMAND = "import sys; from shrinkgpu.worker.probe import main; main(sys.argv[1:])"

_libc = None


def _prctl(option: int, value: int) -> bool:
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(option, value, 0, 0, 0) == 0
    except Exception:
        return False


class Supervisor:
    def __init__(self, cmd_fd: int, evt_fd: int, unset: tuple[str, ...] = ()):
        self.cmd_fd = cmd_fd
        self.evt_fd = evt_fd
        self.buffer = b""
        self.running: dict[int, dict[str, Any]] = {}  # pid -> run
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGTERM, lambda *_: self._shutdown(0))
        self.preloaded: list[str] = []
        # The environment the user's script must see, before any preloaded module had a
        # chance to set a variable at import time.
        self.environ = {k: v for k, v in os.environ.items() if k not in unset}

    # -- protocol -----------------------------------------------------------------
    def send(self, **event: Any) -> None:
        data = (json.dumps(event) + "\n").encode()
        while data:
            n = os.write(self.evt_fd, data)
            data = data[n:]

    def commands(self) -> list[dict[str, Any]]:
        chunk = os.read(self.cmd_fd, 1 << 16)
        if not chunk:
            self._shutdown(0)
        self.buffer += chunk
        out = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
        return out

    # -- main loop ----------------------------------------------------------------
    def serve(self) -> None:
        self.send(event="ready", pid=os.getpid(), subreaper=self.subreaper)
        while True:
            timeout = None
            if self.running:
                nearest = min(r["deadline"] for r in self.running.values())
                timeout = max(0.0, nearest - time.monotonic())
            readable, _, _ = select.select([self.cmd_fd, self.wake_r], [], [], timeout)
            if self.wake_r in readable:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self._reap()
            self._expire()
            if self.cmd_fd in readable:
                for cmd in self.commands():
                    self.handle(cmd)

    def handle(self, cmd: dict[str, Any]) -> None:
        op = cmd.get("op")
        if op == "run":
            self._start(cmd)
        elif op == "preload":
            self._preload(cmd.get("modules", []), cmd.get("threads"))
        elif op == "cancel":
            for pid, run in list(self.running.items()):
                if run["id"] == cmd.get("id"):
                    run["cancelled"] = True
                    _killpg(pid)
        elif op == "shutdown":
            self._shutdown(0)
        else:
            self.send(event="error", message=f"unknown command {op!r}")

    # -- preloading -----------------------------------------------------------------
    def _preload(self, modules: list[str], threads: int | None = None) -> None:
        started = time.perf_counter()
        failed: list[str] = []
        count = 0
        hazard = fork_hazard()
        if hazard is not None:
            # Tainted before any import of ours (a sitecustomize, PYTHONSTARTUP).
            self.send(event="preload_refused", module=None, reason=hazard)
            self._shutdown(3)
        for name in modules:
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
                count += 1
            except BaseException:  # noqa: BLE001 - a module that cannot import is skipped
                failed.append(name)
            hazard = fork_hazard()
            if hazard is not None:
                # The process is tainted for good: say which import did it and stop;
                # the client starts a new supervisor without that module.
                self.send(event="preload_refused", module=name, reason=hazard)
                self._shutdown(3)
        if threads:
            # Sized here, once, the pools keep their size in every child: a child that
            # sized them itself would pay threadpoolctl's library scan (~50 ms) per run.
            from shrinkgpu.worker.probe import limit_threads

            limit_threads(int(threads))
        # One fork for nothing, whatever the thread count: the child asks torch whether
        # a CUDA call in this process has made forks unusable.
        hazard = fork_hazard(deep=True)
        if hazard is not None:
            self.send(event="preload_refused", module=None, reason=hazard)
            self._shutdown(3)
        self.preloaded.extend(modules)
        # Every forked child runs the probe: imported here once (standard library only, no
        # state at import), it costs nothing per child instead of ~15 ms of each run.
        from shrinkgpu.worker import probe

        probe.disown_finalizers()  # once here, not in every child

        # Everything imported so far lives as long as the supervisor: move it out of the
        # collector's reach, so a child's garbage collections do not walk (and, through
        # reference counts, copy) the parent's pages.
        import gc

        gc.collect()
        gc.freeze()
        _flush_std()
        self.send(
            event="preloaded",
            imported=count,
            failed=failed,
            seconds=time.perf_counter() - started,
        )

    # -- candidates -------------------------------------------------------------------
    def _start(self, cmd: dict[str, Any]) -> None:
        mode = cmd["mode"]
        if mode == "fork":
            hazard = fork_hazard()
            if hazard is not None:
                self.send(event="finished", id=cmd["id"], error=f"cannot fork: {hazard}")
                return
        _flush_std()
        pid = os.fork()
        if pid == 0:
            self._child(cmd)  # never returns
        started = time.monotonic()
        self.running[pid] = {
            "id": cmd["id"],
            "started": started,
            "deadline": started + float(cmd.get("timeout", 60.0)),
            "timed_out": False,
            "cancelled": False,
        }
        self.send(event="started", id=cmd["id"], pid=pid)

    def _child(self, cmd: dict[str, Any]) -> None:
        code = EXIT_CHILD_SETUP_FAILED
        try:
            os.setsid()
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == 1:  # the supervisor died between fork and prctl
                os._exit(code)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for fd in (self.cmd_fd, self.evt_fd, self.wake_r, self.wake_w):
                os.close(fd)
            _redirect(0, cmd["stdin"], os.O_RDONLY)
            _redirect(1, cmd["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            _redirect(2, cmd["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            environ = {**self.environ, **cmd.get("env", {})}  # e.g. CUDA_VISIBLE_DEVICES pinning
            if cmd["mode"] == "fresh":
                exe = sys.executable
                os.execve(exe, [exe, "-c", FRESH_COMMAND, cmd["request_path"]], environ)
            if os.environ != environ:
                os.environ.clear()
                os.environ.update(environ)
            from shrinkgpu.worker import probe

            code = probe.run(cmd["request"], forked=True)
        except BaseException:  # noqa: BLE001 - report, then leave by os._exit below
            try:
                traceback.print_exc()
                sys.stderr.flush()
            except Exception:
                pass
        finally:
            os._exit(code)

    def _reap(self, sweep: bool = True) -> None:
        finished = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            run = self.running.pop(pid, None)
            if run is None:
                continue  # an orphan re-parented to us and already killed
            # Whatever the candidate left in its group (DataLoader workers, a
            # subprocess it never waited for) goes with it.
            _killpg(pid)
            code = os.waitstatus_to_exitcode(status)
            self.send(
                event="finished",
                id=run["id"],
                exit_code=code if code >= 0 else None,
                signal=-code if code < 0 else None,
                timed_out=run["timed_out"],
                cancelled=run["cancelled"],
                wall=time.monotonic() - run["started"],
            )
            finished = True
        if finished and sweep:
            self._sweep_orphans()

    def _expire(self) -> None:
        now = time.monotonic()
        for pid, run in self.running.items():
            if not run["timed_out"] and now >= run["deadline"]:
                run["timed_out"] = True
                _killpg(pid)

    def _sweep_orphans(self) -> None:
        """Kill processes re-parented to us that no running candidate accounts for, with
        their whole trees (a double-forked daemon is not a group leader, and its own
        children would otherwise be re-parented to us only after it died)."""
        if not self.subreaper:
            return
        try:
            import psutil
        except ImportError:
            return
        for _ in range(8):
            pids = _child_pids()
            if pids is not None and not (pids - self.running.keys()):
                return  # the common case, answered without psutil's walk of all of /proc
            try:
                me = psutil.Process()
                orphans = [c for c in me.children() if c.pid not in self.running]
            except Exception:
                return
            if not orphans:
                return
            for orphan in orphans:
                try:
                    tree = [orphan, *orphan.children(recursive=True)]
                except Exception:
                    tree = [orphan]
                for proc in tree:
                    try:
                        _killpg(os.getpgid(proc.pid))
                    except (ProcessLookupError, PermissionError, OSError):
                        pass
                    try:
                        proc.kill()
                    except Exception:
                        pass
            self._reap(sweep=False)
            time.sleep(0.005)

    def _shutdown(self, code: int) -> None:
        for pid, run in list(self.running.items()):
            run["cancelled"] = True
            _killpg(pid)
        deadline = time.monotonic() + 2.0
        while self.running and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)
        self._sweep_orphans()
        os._exit(code)


def _child_pids() -> set[int] | None:
    """This process's children from the kernel's own list (Linux 3.5+), or None where
    there is no such list."""
    try:
        tasks = os.listdir("/proc/self/task")
        pids: set[int] = set()
        for tid in tasks:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                pids.update(int(p) for p in fh.read().split())
        return pids
    except (OSError, ValueError):
        return None


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _redirect(fd: int, path: str, flags: int) -> None:
    new = os.open(path, flags, 0o600)
    if new != fd:
        os.dup2(new, fd)
        os.close(new)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cmd_fd, evt_fd = int(argv[0]), int(argv[1])
    Supervisor(cmd_fd, evt_fd, tuple(argv[2:])).serve()


if __name__ == "__main__":
    main()
