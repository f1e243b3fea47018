"""The candidate's process: made to look like ``python SCRIPT ARGS`` in the user's
cwd, its thread pools and random state, its modules and versions, and its exit as
Python's own."""

from __future__ import annotations

import os
import sys
from typing import Any

from shrinkgpu.worker.probe.paths import is_under
from shrinkgpu.worker.probe.recorder import message_of
from shrinkgpu.worker.protocol import RunRequest


def loaded_modules(roots: tuple[str, ...]) -> list[list[Any]]:
    """[name, file, path relative to the run's root or None], in import order.

    sys.modules keeps insertion order, so importing in this order reproduces the run's.
    """
    out = []
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        local = None
        if isinstance(file, str) and not os.path.isabs(file):
            file = None  # a relative __file__ (torch.ops) would resolve against the run's cwd
        if isinstance(file, str):
            path = os.path.abspath(file)
            for root in roots:
                if is_under(path, (root,)):
                    local = os.path.relpath(path, root)
                    break
        out.append([name, file if isinstance(file, str) else None, local])
    return out


def environment_facts() -> dict[str, Any]:
    """Versions and backend, for the maintainer's report.  Never initialises CUDA: device
    names are read only if the script itself did."""
    import platform

    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    torch = sys.modules.get("torch")
    if torch is None:
        return env
    version = getattr(torch, "version", None)
    env["torch"] = getattr(torch, "__version__", None)
    env["cuda"] = getattr(version, "cuda", None)
    env["hip"] = getattr(version, "hip", None)
    env["threads"] = thread_counts()
    distributed = sys.modules.get("torch.distributed")
    try:
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            env["distributed"] = {"backend": str(distributed.get_backend()), "world_size": distributed.get_world_size(),
                                  "rank": distributed.get_rank()}
    except Exception:  # a process group torn down by the error: the report says less
        pass
    try:
        if torch.cuda.is_initialized():
            env["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:  # a broken context after a device-side assert
        env["devices_error"] = message_of(exc).splitlines()[0] if message_of(exc) else type(exc).__name__
    return env


def prepare_process(request: RunRequest, *, forked: bool) -> None:
    """Make this process look like ``python SCRIPT ARGS`` started in the user's cwd."""
    os.chdir(request.cwd)
    sys.argv = list(request.argv)
    if request.module:
        # python -m: argv[0] is the module's full path, the module name is in orig_argv,
        # and the working directory heads the path.
        sys.argv[0] = os.path.abspath(request.script)
        sys.orig_argv = [sys.executable, "-m", request.module, *request.argv[1:]]
        path0 = os.getcwd()
    else:
        sys.orig_argv = [sys.executable, *request.argv]
        path0 = os.path.dirname(os.path.abspath(request.script))
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    if forked:
        fresh_process()


def fresh_process() -> None:
    """What a new interpreter has and a fork of the server does not: random state of its
    own, torch's thread count from the environment, the temporary directory the
    environment names."""
    _fresh_random_state()
    size_torch_threads()
    # A preloaded module may have asked for the temporary directory already; the
    # script must get the one its environment names (the run's own, see Runner).
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile.tempdir = None


def disown_finalizers() -> None:
    """Called in the supervisor once it has preloaded: the finalizers made so far belong
    to it, not to any script, and a forked child must not run them at exit.  They are
    library teardown done at import (torch registers one per operator library, about
    170, and running them took 30 ms of a 70 ms candidate), and one that removes a directory a module made at import
    would remove the supervisor's, shared by every later child.  The script's own
    finalizers (a ``TemporaryDirectory`` it never closed) are made after this and run as
    under ``python script.py``; ``atexit`` callbacks are kept as they are (logging's
    shutdown flushes the script's handlers)."""
    import weakref

    for fin in list(getattr(weakref.finalize, "_registry", {})):
        try:
            fin.atexit = False
        except Exception:  # a private registry of the stdlib; never worth failing a run
            pass


# Variables that size thread pools at library load: a fresh interpreter reads them, and
# a forked child has them set too, for the processes it starts.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(count: int) -> None:
    """Size this process's BLAS and OpenMP pools to ``count`` threads, as
    ``OMP_NUM_THREADS=count`` (and the BLAS variables) would have at load: called in the
    supervisor after preloading, where the variables come too late; forked children
    inherit the sizes.  Not torch's own count: ``torch.set_num_threads(n)`` for n > 1
    starts an OpenMP team at once, whose threads do not stop at fork, and the server
    could no longer fork; each forked child sets it (``size_torch_threads``)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a dependency; a broken install must not stop the run
        return
    try:
        threadpool_limits(limits=count)
    except Exception:
        pass


def size_torch_threads() -> None:
    """In a forked child: torch's intra-op count as ``OMP_NUM_THREADS`` in the run's
    environment asks (a thread cap, or torchrun's one thread per rank), which a fresh
    interpreter's torch reads as it loads and a fork inherits from the server instead."""
    torch = sys.modules.get("torch")
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if torch is None or not wanted.isdigit() or int(wanted) < 1:
        return
    try:
        if torch.get_num_threads() != int(wanted):
            torch.set_num_threads(int(wanted))
    except Exception:  # a torch without the call: the count stays the server's
        pass


def thread_counts() -> dict[str, Any]:
    """The thread pools' sizes as the script sees them, for the report and the jobs rule."""
    out: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch"] = torch.get_num_threads()
            out["torch_interop"] = torch.get_num_interop_threads()
        except Exception:
            pass
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_info

            blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
            if blas:
                out["blas"] = max(blas)
        except Exception:
            pass
    return out


def _fresh_random_state() -> None:
    """A fresh interpreter seeds Python's, NumPy's and torch's default generators from
    the OS; so must a fork.  Otherwise every candidate would share the parent's streams,
    and a candidate that deleted the script's seeding would look deterministic during
    reduction and fail only sometimes afterwards."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed()
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()


def dump_stack_on_crash(path: str) -> None:
    """Have a death by SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL leave the Python stack in its own
    file (the last user frame tells two crashes apart), not on the script's stderr, which
    stays as ``python script.py`` writes it.  The signal still kills the process.
    faulthandler holds a reference to the file it is given, so the file stays open for
    the process's lifetime without one of ours."""
    import faulthandler

    try:
        crash_file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - must outlive this call
        faulthandler.enable(file=crash_file, all_threads=False)
    except (OSError, ValueError, RuntimeError):
        pass


def run_exit_handlers() -> None:
    """What ``python script.py`` does after the script: ``atexit`` callbacks, which
    include ``weakref.finalize`` objects such as a ``TemporaryDirectory`` the script never
    closed.  Non-daemon threads are not waited for (the run is over once the script's
    main code returned or raised); an exception in a callback is printed, as Python
    does, and changes nothing."""
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - the observation is written; nothing may undo it
        pass
    flush_streams()


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
