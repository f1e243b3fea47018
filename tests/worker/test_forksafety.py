"""forksafety.py: whether a process may be forked into clean candidates, checked for
what it is: the CUDA driver initialised (not merely mapped), torch's bad-fork flag,
threads that would keep running across fork.
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


def _in_a_fresh_interpreter(code: str, driver_dir) -> list[str]:
    import subprocess

    env = {**os.environ, "LD_LIBRARY_PATH": str(driver_dir)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_a_mapped_driver_is_no_hazard_until_cuinit_ran(standin_driver):
    # What a CUDA build of torch does at import (cuBLASLt opens the driver), then what a
    # CUDA call does first.  Asking the driver initialises nothing.
    lines = _in_a_fresh_interpreter(
        "import ctypes\n"
        "from shrinkgpu.worker.forksafety import driver_state, fork_hazard\n"
        "print(driver_state(), fork_hazard())\n"
        "lib = ctypes.CDLL('libcuda.so.1')\n"
        "print(driver_state(), fork_hazard())\n"
        "lib.cuInit(0)\n"
        "print(driver_state())\n"
        "print(fork_hazard())\n",
        standin_driver)
    assert lines == [
        "None None",
        "('libcuda.so.1', 'not initialised') None",
        "('libcuda.so.1', 'initialised')",
        "the CUDA driver (libcuda.so.1) was initialised in this process (cuInit: a CUDA call such as "
        "torch.cuda.is_available() or device_count() was made)",
    ]


def test_a_cuda_build_of_torch_maps_the_driver_and_stays_forkable_until_a_cuda_call(standin_driver):
    # The premise, on the build GPU users have (run on the CPU with the stand-in driver):
    # importing torch maps libcuda.so.1 and calls nothing in it.
    from worker.helpers import cuda_build

    if not cuda_build():
        pytest.skip("a CPU build of torch never maps the driver; the CUDA build is tested by python -m "
                    "evaluation.newest_torch")
    lines = _in_a_fresh_interpreter(
        "import torch\n"
        "from shrinkgpu.worker.forksafety import driver_state, fork_hazard\n"
        "print(driver_state(), fork_hazard(deep=True))\n"
        "torch.cuda.is_available()\n"
        "print(torch.cuda.is_initialized(), driver_state())\n"
        "print(fork_hazard())\n",
        standin_driver)
    assert lines[0] == "('libcuda.so.1', 'not initialised') None"
    assert lines[1] == "False ('libcuda.so.1', 'initialised')"
    assert lines[2].startswith("the CUDA driver (libcuda.so.1) was initialised in this process")


def test_torchs_bad_fork_flag_is_read_in_a_forked_child(standin_driver):
    lines = _in_a_fresh_interpreter(
        "import sys\n"
        f"sys.path.insert(0, {str(standin_driver)!r})\n"
        "import torch\n"
        "from shrinkgpu.worker.forksafety import fork_hazard\n"
        "print(fork_hazard(deep=True))\n"
        "import poisons\n"
        "print(fork_hazard(), '|', fork_hazard(deep=True))\n",
        standin_driver)
    assert lines == ["None", "None | torch marks forked children as unable to use CUDA (torch.cuda.is_available() "
                             "or device_count() was called)"]


def test_no_driver_in_this_process():
    # The test process itself (numpy and torch imported) never touched CUDA.
    assert loaded_driver() is None
    assert fork_hazard() is None or "thread" in fork_hazard()
