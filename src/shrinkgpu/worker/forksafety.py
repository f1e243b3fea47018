"""Whether a process may be forked into clean candidates: checks made in the supervisor.

A forked child is a faithful ``python script.py`` only if the parent hands it nothing it
cannot use.  Two things break that, and both are checked for what they really are rather
than by one proxy:

* **CUDA touched in the parent.**  What breaks a forked child is the driver having been
  *initialised* (``cuInit``, which every context and every runtime call starts with), not
  the driver library being mapped: a CUDA build of torch maps ``libcuda.so.1`` as it is
  imported (``libtorch_cuda`` needs cuBLASLt, which opens the driver as it loads) and
  calls nothing in it until a CUDA call.  ``torch.cuda.is_initialized()`` is only torch's
  own lazy-init flag: ``torch.cuda.is_available()`` (without
  ``PYTORCH_NVML_BASED_CUDA_CHECK``) and ``device_count()`` initialise the driver while
  the flag stays False.  So the checks are: the flag; the driver, when mapped, asked
  whether it was initialised (``cuDeviceGetCount`` answers ``CUDA_ERROR_NOT_INITIALIZED``
  before ``cuInit``, and initialises nothing); and, once per preload, whether a forked
  child is in torch's "bad fork" state (``torch._C._cuda_isInBadFork``: torch sets it for
  the children of a process that asked for the device count even where the driver
  itself failed, so a child's CUDA call would fail with another message).
* **Threads that survive a fork.**  ``fork()`` copies only the calling thread; a lock
  another thread held stays locked in the child.  But the pools that real imports start
  are fork-aware: numpy's and scipy's OpenBLAS start one worker per core at load and stop
  them in a ``pthread_atfork`` *prepare* handler, then start again on the next BLAS call.
  Counting threads would refuse every user who has numpy.  So when more than one thread
  runs, the supervisor forks once for nothing (the child exits at once) and counts again:
  the threads left are the ones that would be running at a real fork, and only those are
  a hazard.  docs/executors.md has what each library was seen to do.
"""

from __future__ import annotations

import ctypes
import os
import sys

# dlopen flag: only look the library up among those already loaded (glibc, musl).
RTLD_NOLOAD = 4
# The user-space CUDA driver.  The runtime (libcudart) and cuBLAS are linked into torch's
# CUDA build and loaded at import, and cuBLASLt maps the driver as it loads; nothing
# initialises the driver before a CUDA call.  ROCm's runtime libraries are linked into
# torch and loaded at import, so on ROCm the thread check and torch's bad-fork flag are
# what tell: initialising HSA starts threads that survive fork.
DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so")
CUDA_SUCCESS = 0
CUDA_ERROR_NOT_INITIALIZED = 3
EXIT_BAD_FORK = 17


def threads() -> list[str]:
    """Names of this process's threads, the calling one (the one a fork copies) first: a
    Python thread by its ``threading`` name (what its author chose), any other by the
    kernel's ``comm``."""
    import threading

    if not sys.platform.startswith("linux"):
        me = threading.current_thread()
        return [me.name] + [t.name for t in threading.enumerate() if t is not me]
    python_names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    me = threading.get_native_id()
    # Not sorted by id to find the caller: thread ids come from the pid space, which
    # wraps, so a thread started later can hold a lower id than the main thread.
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    names = []
    for tid in sorted(tids, key=lambda t: (t != me, t)):
        name = python_names.get(tid)
        if name is None:
            try:
                with open(f"/proc/self/task/{tid}/comm", encoding="utf-8", errors="replace") as fh:
                    name = fh.read().strip()
            except OSError:  # the thread ended while we looked
                continue
        names.append(name)
    return names


def loaded_driver() -> str | None:
    """The CUDA driver library if this process has loaded it, without loading it."""
    return _driver()[0]


def _driver() -> tuple[str | None, ctypes.CDLL | None]:
    if not sys.platform.startswith("linux"):
        return None, None
    for name in DRIVER_LIBRARIES:
        try:
            return name, ctypes.CDLL(name, mode=RTLD_NOLOAD)
        except OSError:
            continue
    return None, None


def driver_state() -> tuple[str, str] | None:
    """(library, state) of the CUDA driver this process has loaded, None when none is:
    state ``"initialised"`` after ``cuInit``, ``"not initialised"`` before, ``"unknown"``
    when the library answers no ``cuDeviceGetCount`` (it is then no driver to ask)."""
    name, handle = _driver()
    if name is None or handle is None:
        return None
    try:
        count = handle.cuDeviceGetCount
    except AttributeError:
        return name, "unknown"
    count.restype = ctypes.c_int
    count.argtypes = [ctypes.POINTER(ctypes.c_int)]
    devices = ctypes.c_int(0)
    # Any answer but "not initialised" (success, a driver that failed to start) means
    # cuInit ran here: forked children would inherit its state.
    if count(ctypes.byref(devices)) == CUDA_ERROR_NOT_INITIALIZED:
        return name, "not initialised"
    return name, "initialised"


def _fork_for_nothing(check_bad_fork: bool = False) -> bool:
    """Fork a child that exits at once, letting fork-aware pools stop in their atfork
    handlers; True when the child found torch's bad-fork flag set."""
    pid = os.fork()
    if pid == 0:
        code = 0
        if check_bad_fork:
            try:
                torch = sys.modules.get("torch")
                flag = getattr(getattr(torch, "_C", None), "_cuda_isInBadFork", None)
                if flag is not None and flag():
                    code = EXIT_BAD_FORK
            except BaseException:  # noqa: BLE001 - a check, never a reason to linger
                pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == EXIT_BAD_FORK


def fork_hazard(*, deep: bool = False) -> str | None:
    """Why forking this process now would hand children a broken state, or None.

    ``deep`` also forks a child to ask torch whether it considers forks bad (once per
    preload: a fork of a large process costs tens of milliseconds); a mapped driver that
    cannot be asked makes the check deep."""
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            return "CUDA is initialised"
    driver = driver_state()
    if driver is not None:
        name, state = driver
        if state == "initialised":
            return (f"the CUDA driver ({name}) was initialised in this process (cuInit: a CUDA call such as "
                    "torch.cuda.is_available() or device_count() was made)")
        deep = deep or state == "unknown"
    names = threads()
    if len(names) > 1 or deep:
        if _fork_for_nothing(check_bad_fork=deep and torch is not None):
            return ("torch marks forked children as unable to use CUDA (torch.cuda.is_available() or "
                    "device_count() was called)")
        names = threads()
    if len(names) > 1:
        others = ", ".join(repr(n) for n in names[1:])
        return f"{len(names) - 1} other thread(s) keep running across fork ({others})"
    return None


def may_poison_forks() -> bool:
    """Whether a CUDA call can have marked forks as bad here without initialising the
    driver: torch is imported and built with CUDA or ROCm (a CPU build has no such flag)."""
    torch = sys.modules.get("torch")
    return torch is not None and hasattr(getattr(torch, "_C", None), "_cuda_isInBadFork")
