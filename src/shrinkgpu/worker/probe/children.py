"""Processes the script starts itself: the ranks of ``torch.multiprocessing.spawn`` and
``start_processes`` (any start method) and the targets of ``multiprocessing.Process``
that the user's code defines, each watched like a run of its own.

A script that starts its own ranks fails in a child: the parent only raises
``ProcessRaisedException`` quoting the child's traceback as text (or
``ProcessExitedException`` for a child killed by a signal).  The first error is the
child's, with its operator and tensors, so every such child runs under the probe and
writes a report of its own, ``<observation>.child<k>`` (k: the rank torch gave it, or
the order the script started it), which the executor reads beside the parent's
(worker/group.py).  How the child comes to run under the probe depends on how it starts:

* **fork** (``start_processes(..., start_method="fork")``, ``multiprocessing.Process``
  on Linux): the child is a copy of the parent, probe included; ``_bootstrap``, which
  every child of ``multiprocessing`` runs first, is wrapped to start the child's report.
* **spawn** in a fresh run (the first run, the checks of the result): the new
  interpreter's command line is ours, which watches the child and then hands over to
  ``multiprocessing.spawn.spawn_main`` with the arguments multiprocessing gave it.
* **spawn** in a forked candidate: a new interpreter would import torch again (seconds
  per rank).  ``Zygote`` is a copy of the candidate made before the script ran (what
  the fork server handed it: torch imported, nothing of the script's); each spawned child
  is forked from it, given the file descriptors, environment and working directory
  ``multiprocessing`` would have given a new interpreter, and runs ``spawn_main``'s own
  loop: the script's main module is run again as ``__mp_main__`` and the target
  unpickled, exactly as spawn does.  The zygote's child is made the candidate's own (a
  double fork under the candidate as child subreaper), so ``multiprocessing`` waits for
  it, reads its exit code and terminates it as it would its own child.

Standard library only until the script imports torch.
"""

from __future__ import annotations

import collections
import fcntl
import itertools
import json
import os
import re
import signal
import socket
import sys
import time
from typing import Any, Callable

from shrinkgpu.worker.probe.paths import is_user_file
from shrinkgpu.worker.protocol import ProbeReport, RunStatus

CHILD_SUFFIX = ".child"
# The attribute a watched process object carries (pickled with it to a spawned child).
MARK = "_shrinkgpu_child"
PR_SET_CHILD_SUBREAPER = 36
MAX_MESSAGE = 1 << 20
MAX_FDS = 250
ANSWER_WITHIN = 60.0  # seconds the zygote has to fork a spawned child


def child_path(path: str, index: int) -> str:
    """Where child ``index`` of a run writes what the run writes at ``path``."""
    return f"{path}{CHILD_SUFFIX}{index}"


class Children:
    """The parent's side: which processes it started are watched, and how they start."""

    def __init__(self, request, roots: tuple[str, ...], rel: Callable[[str], str], zygote: "Zygote | None"):
        self.request = request
        self.roots = roots
        self.rel = rel
        self.zygote = zygote
        self.started: list[dict[str, Any]] = []  # what the parent's report says of each
        self._order = itertools.count()
        self._modules: list = []

    # -- which processes are ranks -------------------------------------------------------
    def mark(self, process) -> None:
        """Give ``process`` (about to start) its index when it is one of the script's own."""
        target = getattr(process, "_target", None)
        spawn = sys.modules.get("torch.multiprocessing.spawn")
        wrap = getattr(spawn, "_wrap", None) if spawn is not None else None
        if target is not None and target is wrap:
            args = getattr(process, "_args", ())
            index = int(args[1]) if len(args) > 1 and isinstance(args[1], int) else next(self._order)
            launcher = "mp.spawn" if _called_from("spawn", "torch/multiprocessing/spawn.py") else "start_processes"
        elif target is not None and self._users(target):
            index, launcher = next(self._order), "multiprocessing.Process"
        else:
            return  # a DataLoader worker, a Pool's worker, a library's own process
        method = process._start_method or _default_method()
        setattr(process, MARK, index)
        self.started.append({"index": index, "launcher": launcher, "method": method})
        self._say_started()

    def _say_started(self) -> None:
        """What the parent started so far, and the modules it had imported when it started
        the first, beside its report (``<observation>.started``): a parent stopped with
        ranks that hang writes no report, and these are what a fork server preloads and
        what the hang names."""
        from shrinkgpu.worker.probe.process import loaded_modules

        if len(self.started) == 1:
            self._modules = loaded_modules(self.roots)
        path = f"{self.request.observation}.started"
        try:
            with open(f"{path}.tmp", "w", encoding="utf-8") as fh:
                json.dump({"children": self.started, "modules": self._modules}, fh)
            os.replace(f"{path}.tmp", path)
        except OSError:
            pass  # an aid for a run that will not report; never a reason to fail one

    def _users(self, target) -> bool:
        module = getattr(target, "__module__", None)
        if module in ("__main__", "__mp_main__"):
            return True
        code = getattr(target, "__code__", None)
        return code is not None and is_user_file(code.co_filename, self.roots)

    # -- how a spawned child starts ------------------------------------------------------
    def launch(self, index: int, path: str, args: list[str], passfds: list[int]) -> int:
        """Start spawned child ``index`` (``path``, ``args``: multiprocessing's command line
        for a new interpreter, ``passfds``: the descriptors it keeps): forked from the
        zygote when there is one, else a new interpreter whose command watches the child
        first; multiprocessing's own start when the command line is not one we know."""
        handles = _handles(args)
        if handles is None:
            return ORIGINAL["spawnv_passfds"](path, args, passfds)
        if self.zygote is not None:
            return self.zygote.spawn(index, passfds, handles, self.request_file())
        i = args.index("-c")
        prog = (f"from shrinkgpu.worker.probe.children import exec_child; exec_child({self.request_file()!r}, "
                f"{index}); {args[i + 1]}")
        return ORIGINAL["spawnv_passfds"](path, [*args[:i + 1], prog, *args[i + 2:]], passfds)

    def request_file(self) -> str:
        """The request every child reads (written once, beside the parent's report)."""
        path = f"{self.request.observation}.children.json"
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(self.request.to_json(), fh)
        return path


ORIGINAL: dict[str, Any] = {}
WATCHING: Children | None = None


def watch_children(children: Children) -> None:
    """Patch ``multiprocessing`` in this process (and so in its forked children) so that the
    script's own processes are watched (the class attributes are restored by no one: the
    process is the script's until it ends)."""
    global WATCHING
    import multiprocessing.popen_spawn_posix as popen_spawn
    import multiprocessing.process as process
    from multiprocessing import util

    WATCHING = children
    if ORIGINAL:
        return  # (a second run in one process: the patches stay, the watch is the new one)
    ORIGINAL.update(start=process.BaseProcess.start, bootstrap=process.BaseProcess._bootstrap,
                    launch=popen_spawn.Popen._launch, spawnv_passfds=util.spawnv_passfds)

    def start(self):
        if WATCHING is not None and not hasattr(self, MARK):
            WATCHING.mark(self)
        return ORIGINAL["start"](self)

    def _launch(self, process_obj):
        index = getattr(process_obj, MARK, None)
        if WATCHING is None or index is None:
            return ORIGINAL["launch"](self, process_obj)

        def spawnv_passfds(path, args, passfds):
            return WATCHING.launch(index, path, list(args), list(passfds))

        util.spawnv_passfds = spawnv_passfds
        try:
            return ORIGINAL["launch"](self, process_obj)
        finally:
            util.spawnv_passfds = ORIGINAL["spawnv_passfds"]

    def _bootstrap(self, parent_sentinel=None):
        index = getattr(self, MARK, None)
        if index is None or CHILD is None:
            return ORIGINAL["bootstrap"](self, parent_sentinel)
        return CHILD.run(self, index, lambda: ORIGINAL["bootstrap"](self, parent_sentinel))

    process.BaseProcess.start = start
    process.BaseProcess._bootstrap = _bootstrap
    popen_spawn.Popen._launch = _launch


# -- the child's side ------------------------------------------------------------------------
class ChildRun:
    """What a watched child records: set up by whoever made the child (``forked_child``,
    ``exec_child``, the zygote), run by the wrapped ``_bootstrap``."""

    def __init__(self, request, setup: Callable[[Any, int], Any]):
        self.request = request
        # (request for this child, index) -> (a Recorder, the records of the calls that
        # raised whose arguments were kept), its probe started
        self.setup = setup

    def run(self, process, index: int, bootstrap: Callable[[], int]) -> int:
        from shrinkgpu.worker.probe.recorder import record_chain, record_suppressed

        global WATCHING
        request = self.request.for_child(index)
        recorder, raised_calls = self.setup(request, index)
        if WATCHING is not None:  # (its own children write beside its report, not its siblings')
            WATCHING = Children(request, WATCHING.roots, WATCHING.rel, None)
        started = time.perf_counter()
        obs: dict[str, Any] = {}
        target = process._target
        caught: list[BaseException] = []

        def watched(fn):
            def call(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                except BaseException as exc:
                    caught.append(exc)
                    obs["failed_at"] = time.time()
                    raise
            return call

        spawn = sys.modules.get("torch.multiprocessing.spawn")
        if spawn is not None and target is getattr(spawn, "_wrap", None):
            fn, i, args, error_file = process._args
            process._args = (watched(fn), i, args, error_file)  # _wrap catches what fn raises
        elif target is not None:
            process._target = watched(target)
        code = bootstrap()
        status = RunStatus.OK
        if caught and not isinstance(caught[-1], (SystemExit, KeyboardInterrupt)):
            status = RunStatus.EXCEPTION
            obs["chain"] = record_chain(caught[-1], recorder)
            obs["suppressed"] = record_suppressed(caught[-1], recorder)
        if raised_calls:
            obs["raised_calls"] = raised_calls
        elif code != 0:
            status = RunStatus.EXIT
        _finish(request, recorder, obs, status, code, time.perf_counter() - started)
        return code


CHILD: ChildRun | None = None


def _finish(request, recorder, obs: dict[str, Any], status: RunStatus, code: int, seconds: float) -> None:
    from shrinkgpu.worker.probe.process import environment_facts, flush_streams, loaded_modules

    obs["torch_errors"] = recorder.errors
    obs["duration"] = seconds
    if request.watch.collect_modules:
        obs["modules"] = loaded_modules(tuple(os.path.abspath(r) for r in request.roots))
    if request.watch.collect_env:  # (threadpoolctl's scan of the libraries: ~50 ms a child)
        obs["environment"] = environment_facts()
    flush_streams()
    tmp = f"{request.observation}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(ProbeReport.from_json({**obs, "status": status, "exit_code": code}).to_json(), fh, default=str)
        os.replace(tmp, request.observation)
    except OSError:
        pass  # the parent's report still stands for the run


# This process's recorder once its run is watched (``watched_here``): a child the script
# forks inherits it (and the mode that feeds it) and records its own run in it.
ACTIVE: list = []


def watched_here(recorder) -> None:
    ACTIVE[:] = [recorder]


def child_setup(request, index: int) -> tuple[Any, list[dict[str, Any]]]:
    """A process the script started itself, watched as a run of its own (``request``:
    its own paths): its recorder, fed by a torch function mode, and the records of the
    calls that raised whose arguments it kept; its crash log, its collectives' file."""
    from shrinkgpu.worker.probe.collectives import watch_collectives
    from shrinkgpu.worker.probe.ops import watch_torch_calls
    from shrinkgpu.worker.probe.process import dump_stack_on_crash
    from shrinkgpu.worker.probe.recorder import Recorder

    roots = tuple(os.path.abspath(r) for r in request.roots)
    raised_calls: list[dict[str, Any]] = []
    if ACTIVE:  # forked from the watched parent: its mode feeds this recorder
        recorder = ACTIVE[0]
        recorder.errors.clear()
        recorder.by_id.clear()
    else:
        recorder = Recorder(roots)
        if request.capture_ops:
            import torch  # noqa: F401  (the mode needs it; the child imports it anyway)

            watch = request.watch
            raised = (watch.keep_raised, raised_calls) if watch.keep_raised else None
            # entered for good: the process ends with the child's run
            watch_torch_calls(recorder.note, watch.capture, None, raised).__enter__()
    if request.crash_log:
        dump_stack_on_crash(request.crash_log)
    path = request.watch.collectives
    if path and "torch.distributed" in sys.modules:  # (never imported for the watch's sake)
        watch_collectives(path, roots, recorder.rel)
        # "started, in no collective": the hang rule counts this child among the running
        # ones before its first collective
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"out": "start", "seq": 0, "since": time.time()}, fh)
    return recorder, raised_calls


def install_child(request, setup: Callable[[Any, int], Any]) -> None:
    """Make this process (or the children it forks) record watched children with ``setup``."""
    global CHILD
    CHILD = ChildRun(request, setup)


def exec_child(request_path: str, index: int) -> None:
    """The first statement of a spawned child's new interpreter: the probe's watch for
    child ``index``, then multiprocessing's own ``spawn_main`` runs it."""
    from shrinkgpu.worker.protocol import RunRequest

    with open(request_path, encoding="utf-8") as fh:
        request = RunRequest.from_json(json.load(fh))
    install_child(request, child_setup)
    watch_children(Children(request, tuple(os.path.abspath(r) for r in request.roots), str, None))


# -- the zygote -----------------------------------------------------------------------------
class Zygote:
    """A copy of the candidate made before the script ran, which forks spawned children on
    request (see the module's docstring); and the children the script's first run
    spawned, forked as direct children of the candidate before the script ran, each
    waiting for its spawn: a spawn then costs a message, not two forks of a large process
    while the script waits."""

    def __init__(self, pid: int, sock: socket.socket, standbys: list[tuple[int, socket.socket]]):
        self.pid = pid
        self.sock = sock
        self.standbys = collections.deque(standbys)

    @classmethod
    def start(cls, prepare_child: Callable[[], None], ready: int = 1) -> "Zygote | None":
        """Fork the zygote now, and ``ready`` children in advance; ``prepare_child``: what
        a child forked from either does first (the fresh random state a new interpreter
        has, its thread pools).  None where this process cannot become its children's
        subreaper (not Linux)."""
        if not _subreaper():
            return None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            mine.close()
            code = 0
            try:
                _serve(theirs, prepare_child)
            except BaseException:  # noqa: BLE001 - the candidate sees its children fail to start
                code = 1
            os._exit(code)
        theirs.close()
        standbys = []
        for _ in range(ready):
            channel, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            child = os.fork()
            if child == 0:
                channel.close()
                mine.close()
                _waiting(other, prepare_child)  # never returns
            other.close()
            standbys.append((child, channel))
        return cls(pid, mine, standbys)

    def spawn(self, index: int, passfds: list[int], handles: tuple[int, int], request_file: str) -> int:
        message = json.dumps({"numbers": passfds, "env": dict(os.environ), "cwd": os.getcwd(), "index": index,
                              "tracker_fd": handles[0], "pipe_handle": handles[1], "request": request_file})
        if self.standbys:
            pid, channel = self.standbys.popleft()
            socket.send_fds(channel, [message.encode()], passfds)
            channel.close()
            return pid
        socket.send_fds(self.sock, [message.encode()], passfds)
        answer = b""
        # (a fork answers in milliseconds; a zygote stuck for a minute is a failure the
        # script sees at its spawn call, never a run that waits for its limit)
        self.sock.settimeout(ANSWER_WITHIN)
        while not answer.endswith(b"\n"):
            chunk = self.sock.recv(64)
            if not chunk:
                raise OSError("the zygote that forks the script's spawned processes is gone")
            answer += chunk
        pid = int(answer)
        if pid < 0:
            raise OSError("the zygote could not fork a spawned process")
        return pid


def _subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def _serve(sock: socket.socket, prepare_child: Callable[[], None]) -> None:
    """The zygote's loop: one spawned child per message, until the candidate is gone."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    while True:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        if not data:
            return
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.close(r)
            # A double fork: once this middle process is gone the child is re-parented to
            # the nearest subreaper, the candidate, which then waits for it like its own.
            child = os.fork()
            if child == 0:
                os.close(w)
                sock.close()
                waited = time.monotonic()
                while os.getppid() == middle and time.monotonic() - waited < ANSWER_WITHIN:
                    time.sleep(0.0005)  # (re-parented first: a pdeathsig the script sets is the candidate's)
                _child(json.loads(data), fds, prepare_child)  # never returns
            os.write(w, f"{child}\n".encode())
            os._exit(0)
        os.close(w)
        for fd in fds:
            os.close(fd)
        with os.fdopen(r, "rb") as fh:
            pid = fh.read().strip() or b"-1"
        os.waitpid(middle, 0)
        sock.sendall(pid + b"\n")


def _waiting(channel: socket.socket, prepare_child: Callable[[], None]) -> None:
    """A child forked in advance: waits for its spawn's message (the candidate's
    descriptors with it), then becomes that spawned child; leaves when none comes."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(channel, MAX_MESSAGE, MAX_FDS)
        channel.close()
        if data:
            _child(json.loads(data), fds, prepare_child)  # never returns
    finally:
        os._exit(0)


def _child(message: dict[str, Any], fds: list[int], prepare_child: Callable[[], None]) -> None:
    """A spawned child forked from the zygote: the descriptors at the numbers the parent's
    multiprocessing gave them, the parent's environment and directory as it spawned, then
    spawn's own loop (which runs the main module as ``__mp_main__``)."""
    code = 1
    try:
        numbers = [int(n) for n in message["numbers"]]
        # Each received descriptor to the number the parent's multiprocessing gave it
        # (a pickled tensor's shared memory is a descriptor the child opens by number):
        # first above every number involved, so that no dup2 lands on one still needed.
        top = max([*numbers, *fds, 2]) + 1
        staged = [fcntl.fcntl(fd, fcntl.F_DUPFD, top) for fd in fds]
        for fd in fds:
            os.close(fd)
        for fd, number in zip(staged, numbers):
            os.dup2(fd, number, inheritable=True)
        for fd in staged:
            os.close(fd)
        keep = {0, 1, 2, *numbers}
        for fd in _open_fds():
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.environ.clear()
        os.environ.update(message["env"])
        os.chdir(message["cwd"])
        prepare_child()
        exec_child(message["request"], int(message["index"]))
        from multiprocessing import spawn

        sys.argv = ["-c", "--multiprocessing-fork"]  # what a new interpreter started by spawn has
        spawn.spawn_main(tracker_fd=int(message["tracker_fd"]), pipe_handle=int(message["pipe_handle"]))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - printed as a new interpreter would
        import traceback

        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _handles(args: list) -> tuple[int, int] | None:
    """(tracker_fd, pipe_handle) from multiprocessing's command line for a spawned child:
    ``python -c 'from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5,
    pipe_handle=7)' --multiprocessing-fork``; None for any other."""
    if "-c" not in args or args.index("-c") + 1 >= len(args):
        return None
    prog = args[args.index("-c") + 1]
    if not isinstance(prog, str) or "spawn_main(" not in prog:
        return None
    pipe = re.search(r"pipe_handle=(\d+)", prog)
    tracker = re.search(r"tracker_fd=(-?\d+)", prog)
    if pipe is None:
        return None
    return (int(tracker.group(1)) if tracker else -1), int(pipe.group(1))


def _called_from(function: str, file_suffix: str) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_code.co_filename.replace("\\", "/").endswith(file_suffix):
            return True
        frame = frame.f_back
    return False


def _default_method() -> str:
    import multiprocessing

    try:
        return multiprocessing.get_start_method(allow_none=True) or "fork"
    except Exception:
        return "fork"
