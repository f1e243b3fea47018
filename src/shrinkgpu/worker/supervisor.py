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
  refuses (naming the module) rather than go on tainted.  One child is forked ahead of
  need and waits for its command (the fork of a large process costs milliseconds), and
  a forked child reports its exit status itself just before ``os._exit``, so no verdict
  waits for the kernel to tear it down.
* ``fresh``: the child ``exec``s a new interpreter running the probe.

It speaks newline-delimited JSON over two pipes it is given (never stdin/stdout: an
imported module may print at import time): the commands and events of
``worker/protocol.py``.  It stops when its command pipe closes (or at SIGTERM), killing
what still runs.
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

from shrinkgpu.worker.forksafety import fork_hazard, may_poison_forks
from shrinkgpu.worker.protocol import (
    CancelCommand,
    Finished,
    PreloadCommand,
    Preloaded,
    PreloadRefusal,
    Ready,
    RunCommand,
    ServerError,
    Started,
    command_from_json,
)

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
        # A forked child says "done, exit status N" here just before ``os._exit``: the
        # kernel's teardown of a child of a large process (its copied page tables, the
        # pages it wrote) takes several milliseconds that no verdict needs to wait for.
        self.done_r, self.done_w = os.pipe()
        os.set_blocking(self.done_r, False)
        self.done_buffer = b""
        # A child forked ahead of need, waiting for its command (pid, write end of its
        # command pipe): forking a process holding torch copies its page tables, about
        # 5 ms, and that is done while the previous candidate runs, not on the way to
        # the next.  Only once preloading is over: the standby is a copy of the server.
        self.standby: tuple[int, int] | None = None
        self.forking = False
        # The environment the user's script must see, before any preloaded module had a
        # chance to set a variable at import time.
        self.environ = {k: v for k, v in os.environ.items() if k not in unset}

    # -- protocol -----------------------------------------------------------------
    def send(self, event) -> None:
        data = (json.dumps(event.to_json()) + "\n").encode()
        while data:
            n = os.write(self.evt_fd, data)
            data = data[n:]

    def commands(self) -> list[dict[str, Any]]:
        """The commands that arrived, as JSON (``handle`` reads each as its type)."""
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
        self.send(Ready(pid=os.getpid(), subreaper=self.subreaper))
        while True:
            timeout = None
            deadlines = [r["deadline"] for r in self.running.values() if not r["reported"]]
            if deadlines:
                timeout = max(0.0, min(deadlines) - time.monotonic())
            readable, _, _ = select.select([self.cmd_fd, self.wake_r, self.done_r], [], [], timeout)
            if self.wake_r in readable:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            if self.done_r in readable:
                self._done()
            self._reap()
            self._expire()
            if self.cmd_fd in readable:
                for cmd in self.commands():
                    self.handle(cmd)
            if self.forking and self.standby is None:
                self._fork_standby()

    def handle(self, data: dict[str, Any]) -> None:
        try:
            cmd = command_from_json(data)
        except (ValueError, KeyError, TypeError) as exc:
            self.send(ServerError(message=str(exc)))
            return
        if isinstance(cmd, RunCommand):
            self._start(cmd, data)
        elif isinstance(cmd, CancelCommand):
            for pid, run in list(self.running.items()):
                if run["id"] == cmd.id and not run["reported"]:
                    run["cancelled"] = True
                    _killpg(pid)
        else:
            self._preload(cmd)

    # -- preloading -----------------------------------------------------------------
    def _preload(self, cmd: PreloadCommand) -> None:
        modules, threads = list(cmd.modules), cmd.threads
        started = time.perf_counter()
        failed: list[str] = []
        count = 0
        hazard = fork_hazard()
        if hazard is not None:
            # Tainted before any import of ours (a sitecustomize, PYTHONSTARTUP).
            self.send(PreloadRefusal(module=None, reason=hazard))
            self._shutdown(3)
        for name in modules:
            if name in sys.modules:
                continue
            # Importing ``a.b`` first imports ``a``: when ``a`` comes in with it, the
            # hazard may be ``a``'s own, and blaming ``a.b`` would have the next server
            # trip over ``a`` again through ``a.c`` (one attempt per submodule).
            parts = name.split(".")
            parents = (".".join(parts[:i]) for i in range(1, len(parts)))
            blame = next((p for p in parents if p not in sys.modules), name)
            try:
                importlib.import_module(name)
                count += 1
            except BaseException:  # noqa: BLE001 - a module that cannot import is skipped
                failed.append(name)
            # The fork that reads torch's bad-fork flag only where the flag exists, and only
            # when asked: the preload refused as a whole for it is started again to name
            # the module.
            hazard = fork_hazard(deep=cmd.deep_each and may_poison_forks())
            if hazard is not None:
                # The process is tainted for good: say which import did it and stop;
                # the client starts a new supervisor without that module (and what is
                # inside it).
                self.send(PreloadRefusal(module=blame, reason=hazard))
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
            self.send(PreloadRefusal(module=None, reason=hazard, whole=True))
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
        self.send(Preloaded(imported=count, failed=failed, seconds=time.perf_counter() - started))
        self.forking = True

    # -- candidates -------------------------------------------------------------------
    def _start(self, cmd: RunCommand, data: dict[str, Any]) -> None:
        """Start ``cmd`` (``data``: as it arrived, what a waiting child is handed)."""
        pid = self._hand_to_standby(data) if cmd.mode == "fork" else None
        if pid is None:
            if cmd.mode == "fork":
                hazard = fork_hazard()
                if hazard is not None:
                    self.send(Finished(id=cmd.id, error=f"cannot fork: {hazard}"))
                    return
            _flush_std()
            pid = os.fork()
            if pid == 0:
                self._child(cmd)  # never returns
        started = time.monotonic()
        self.running[pid] = {
            "id": cmd.id,
            "started": started,
            "deadline": started + cmd.timeout,
            "timed_out": False,
            "cancelled": False,
            "reported": False,
        }
        self.send(Started(id=cmd.id, pid=pid))

    def _fork_standby(self) -> None:
        if fork_hazard() is not None:
            # Not asked again on every turn of the loop (a hazard check may fork for
            # nothing); each run forks itself and says why it cannot.
            self.forking = False
            return
        r, w = os.pipe()
        _flush_std()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            self._child(None, command_fd=r)  # never returns
        os.close(r)
        self.standby = (pid, w)

    def _hand_to_standby(self, cmd: dict[str, Any]) -> int | None:
        """Give ``cmd`` to the waiting child; its pid, or None when there is none (or it
        died waiting)."""
        if self.standby is None:
            return None
        pid, w = self.standby
        self.standby = None
        data = json.dumps(cmd).encode()
        try:
            while data:
                data = data[os.write(w, data):]
        except OSError:
            _killpg(pid)
            return None
        finally:
            os.close(w)
        return pid

    def _drop_standby(self) -> None:
        if self.standby is not None:
            pid, w = self.standby
            self.standby = None
            os.close(w)  # it reads end of file and leaves
            _killpg(pid)

    def _child(self, cmd: RunCommand | None, command_fd: int | None = None) -> None:
        """The forked child: made a session of its own, then (for a standby) waiting for
        its command, then running it; never returns."""
        code = EXIT_CHILD_SETUP_FAILED
        say_done = False
        try:
            os.setsid()
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == 1:  # the supervisor died between fork and prctl
                os._exit(code)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for fd in (self.cmd_fd, self.evt_fd, self.wake_r, self.wake_w, self.done_r):
                os.close(fd)
            if cmd is None:
                chunks = []
                while chunk := os.read(command_fd, 1 << 16):
                    chunks.append(chunk)
                os.close(command_fd)
                if not chunks:
                    os._exit(0)  # not needed after all
                cmd = RunCommand.from_json(json.loads(b"".join(chunks)))
            say_done = cmd.mode == "fork"
            _redirect(0, cmd.stdin, os.O_RDONLY)
            _redirect(1, cmd.stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            _redirect(2, cmd.stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            environ = {**self.environ, **cmd.env}  # e.g. CUDA_VISIBLE_DEVICES pinning
            if cmd.mode == "fresh":
                exe = sys.executable
                launcher = [exe, *cmd.launcher] if cmd.launcher else []  # torchrun ... --no-python
                os.execve(exe, [*launcher, exe, "-c", FRESH_COMMAND, cmd.request_path], environ)
            if os.environ != environ:
                os.environ.clear()
                os.environ.update(environ)
            from shrinkgpu.worker import probe

            code = probe.run(cmd.request, forked=True)
        except BaseException:  # noqa: BLE001 - report, then leave by os._exit below
            try:
                traceback.print_exc()
                sys.stderr.flush()
            except Exception:
                pass
        finally:
            if say_done:
                try:
                    # One write under PIPE_BUF: never interleaved with another child's.
                    os.write(self.done_w, f"{os.getpid()} {code}\n".encode())
                except OSError:
                    pass
            os._exit(code)

    def _done(self) -> None:
        """Children that said they are done: their status is known and nothing of theirs
        runs any more, so the verdict goes out now; the zombie is reaped later."""
        try:
            while chunk := os.read(self.done_r, 1 << 16):
                self.done_buffer += chunk
        except BlockingIOError:
            pass
        while b"\n" in self.done_buffer:
            line, self.done_buffer = self.done_buffer.split(b"\n", 1)
            try:
                pid, code = (int(x) for x in line.split())
            except ValueError:
                continue
            run = self.running.get(pid)
            if run is None or run["reported"]:
                continue  # a process the script forked that ran on into our exit path
            run["reported"] = True
            _killpg(pid)  # what it started goes with it, as after a reap
            self._finished(run, code)

    def _finished(self, run: dict[str, Any], code: int) -> None:
        self.send(Finished(
            id=run["id"],
            exit_code=code if code >= 0 else None,
            signal=-code if code < 0 else None,
            timed_out=run["timed_out"],
            cancelled=run["cancelled"],
            wall=time.monotonic() - run["started"],
        ))

    def _reap(self, sweep: bool = True) -> None:
        finished = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if self.standby is not None and pid == self.standby[0]:
                os.close(self.standby[1])  # it died waiting; another is forked
                self.standby = None
                continue
            run = self.running.pop(pid, None)
            if run is None:
                continue  # an orphan re-parented to us and already killed
            # Whatever the candidate left in its group (DataLoader workers, a
            # subprocess it never waited for) goes with it.
            _killpg(pid)
            if not run["reported"]:
                self._finished(run, os.waitstatus_to_exitcode(status))
            finished = True
        if finished and sweep:
            self._sweep_orphans()

    def _expire(self) -> None:
        now = time.monotonic()
        for pid, run in self.running.items():
            if not run["timed_out"] and not run["reported"] and now >= run["deadline"]:
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
            known = set(self.running) | ({self.standby[0]} if self.standby else set())
            pids = _child_pids()
            if pids is not None and not (pids - known):
                return  # the common case, answered without psutil's walk of all of /proc
            try:
                me = psutil.Process()
                orphans = [c for c in me.children() if c.pid not in known]
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
        self.forking = False
        self._drop_standby()
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
