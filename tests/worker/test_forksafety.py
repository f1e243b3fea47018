"""forksafety.py: whether a process may be forked into clean candidates, checked for
what it is: the CUDA driver loaded, threads that would keep running across fork.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from shrinkgpu.worker.forksafety import fork_hazard, loaded_driver

np = pytest.importorskip("numpy", reason="the fork server must be tested beside numpy, as users have it")


# -- numpy's pools do not stop the fork server -----------------------------------------
def test_numpy_starts_a_blas_thread_at_import_that_stops_at_fork():
    # The premise, measured: without the fork-for-nothing this server would be refused.
    code = textwrap.dedent(
        """\
        import os, numpy
        from shrinkgpu.worker.forksafety import fork_hazard, threads
        before = len(threads())
        print(before, fork_hazard(), len(threads()))
        """
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, check=True)
    before, hazard, after = out.stdout.split()
    if os.cpu_count() and os.cpu_count() > 1 and "OPENBLAS_NUM_THREADS" not in os.environ:
        assert int(before) > 1  # OpenBLAS's pool, one thread per extra core
    assert (hazard, after) == ("None", "1")


def test_the_thread_that_would_fork_is_named_first_whatever_its_id():
    # Thread ids come from the pid space, which wraps: the main thread need not hold the
    # lowest id (CI once named 'MainThread' as the thread left running across fork).
    import threading

    from shrinkgpu.worker.forksafety import threads

    seen = {}
    stop = threading.Event()
    idle = threading.Thread(target=stop.wait, name="idle-pool")
    idle.start()
    try:
        caller = threading.Thread(target=lambda: seen.setdefault("names", threads()), name="the-forker")
        caller.start()
        caller.join()
    finally:
        stop.set()
        idle.join()
    assert seen["names"][0] == "the-forker"
    assert {"MainThread", "idle-pool"} <= set(seen["names"][1:])


def test_a_loaded_cuda_driver_is_a_hazard_even_when_torch_says_cuda_is_not_initialised(fake_driver):
    import subprocess

    code = (
        "import ctypes, torch\n"
        "from shrinkgpu.worker.forksafety import fork_hazard, loaded_driver\n"
        "print(loaded_driver(), fork_hazard())\n"
        "ctypes.CDLL('libcuda.so.1')\n"
        "print(torch.cuda.is_initialized(), loaded_driver())\n"
        "print(fork_hazard())\n"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    first, second, third = out.stdout.splitlines()
    assert first == "None None"
    assert second == "False libcuda.so.1"
    assert third == "the CUDA driver (libcuda.so.1) is loaded: something called into CUDA"


def test_no_driver_in_this_process():
    # The test process itself (numpy and torch imported) never touched CUDA.
    assert loaded_driver() is None
    assert fork_hazard() is None or "thread" in fork_hazard()
