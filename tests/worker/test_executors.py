"""executors.py with real processes: the fork server where users live.  numpy's thread
pools, the CUDA driver, thread counts, exit handlers, temporary files.

Every candidate must behave like ``python script.py``; the fork server is only worth
having if it also starts in an environment like the users' (numpy installed, which
starts OpenBLAS's threads at import).  Fresh interpreters are the reference throughout.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from shrinkgpu.worker import Isolation, Runner, Sandbox, ScriptSpec
from worker.helpers import cuda_build, python_path

np = pytest.importorskip("numpy", reason="the fork server must be tested beside numpy, as users have it")

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/root"),
    # (the torch under test, where it comes through PYTHONPATH: evaluation.newest_torch)
    **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
}

COUNTS = """\
import json, os
import numpy, torch
from threadpoolctl import threadpool_info
blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
a = numpy.ones((300, 300)); a @ a          # wakes the BLAS pool, as a script would
print(json.dumps({
    "torch": torch.get_num_threads(),
    "interop": torch.get_num_interop_threads(),
    "blas": blas,
    "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    "threads_after_blas": len(os.listdir("/proc/self/task")),
}))
"""


def counts(runner: Runner, mode: Isolation) -> dict:
    obs = runner.run({"s.py": COUNTS}, timeout=120, isolation=mode)
    assert obs.status == "ok", obs.stderr
    return json.loads(obs.stdout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("forkproject")
    (root / "s.py").write_text("pass\n")
    (root / "data.bin").write_bytes(os.urandom(1 << 16))
    return root


@pytest.fixture(scope="module")
def numpy_runner(project):
    spec = ScriptSpec(script=project / "s.py", cwd=project, env=ENV)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        runner.start(["numpy", "torch", "threadpoolctl", "tempfile"], required=True)
        yield runner


def test_fork_server_preloads_numpy_and_torch_without_dropping_anything(numpy_runner):
    report = numpy_runner.preload_report
    assert report.isolation is Isolation.FORK
    assert report.dropped == ()
    assert {"numpy", "torch"} <= set(report.modules)
    obs = numpy_runner.run({"s.py": "import os; print(len(os.listdir('/proc/self/task')))"}, timeout=30)
    assert obs.stdout == "1\n"  # a forked child starts with one thread, as a fresh one does


def test_a_forked_candidate_has_the_thread_counts_of_a_fresh_interpreter(numpy_runner):
    fork, fresh = counts(numpy_runner, Isolation.FORK), counts(numpy_runner, Isolation.FRESH)
    assert fork == fresh
    assert fork["env"] == {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None, "OPENBLAS_NUM_THREADS": None}
    assert fork["torch"] >= 1 and fork["blas"]


def test_a_thread_cap_behaves_like_the_variables_set_for_a_fresh_interpreter(project):
    spec = ScriptSpec(script=project / "s.py", cwd=project, env=ENV)
    with Runner(spec, isolation=Isolation.FORK, threads=1) as runner:
        runner.start(["numpy", "torch", "threadpoolctl"], required=True)
        fork, fresh = counts(runner, Isolation.FORK), counts(runner, Isolation.FRESH)
    assert fork == fresh
    assert fork["threads_after_blas"] == 1
    assert fork["torch"] == 1 and fork["blas"] == [1]
    assert fork["env"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def test_a_cap_of_two_threads_still_forks_and_each_child_gets_it(project):
    # torch.set_num_threads(2) starts an OpenMP team that does not stop at fork: sized in
    # the server, it made the server unforkable (a candidate of 5 ranks on 2 cores, or -j
    # on a larger machine, ran fresh interpreters); each child sizes torch itself.
    spec = ScriptSpec(script=project / "s.py", cwd=project, env=ENV)
    with Runner(spec, isolation=Isolation.FORK, threads=2) as runner:
        report = runner.start(["numpy", "torch", "threadpoolctl"], required=True)
        assert report.isolation is Isolation.FORK and not report.dropped
        fork, fresh = counts(runner, Isolation.FORK), counts(runner, Isolation.FRESH)
    assert fork["torch"] == fresh["torch"] == 2 and fork["blas"] == fresh["blas"] == [2]
    assert fork["env"] == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}


def test_preload_keeps_modules_that_map_the_driver_and_drops_the_one_that_initialises_it(project, standin_driver):
    # A CUDA build of torch maps the driver as it is imported: mapped is not initialised,
    # and torch must stay preloaded.  A CUDA call at import (cuInit) is what taints.
    env = {**ENV, "LD_LIBRARY_PATH": str(standin_driver), "PYTHONPATH": python_path(standin_driver)}
    spec = ScriptSpec(script=project / "s.py", cwd=project, env=env)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        report = runner.start(["torch", "touchcuda", "asks_cuda", "initcuda", "json"])
        assert report.isolation is Isolation.FORK
        # on a CUDA build, torch.cuda.is_available() initialises the driver too
        asks = () if cuda_build() else ("asks_cuda",)
        assert report.modules == ("torch", "touchcuda", *asks, "json")
        assert [d.module for d in report.dropped] == [*(["asks_cuda"] if cuda_build() else []), "initcuda"]
        assert report.dropped[-1].reason.startswith("the CUDA driver (libcuda.so.1) was initialised in this process")
        obs = runner.run({"s.py": "import sys; print('touchcuda' in sys.modules, 'initcuda' in sys.modules)"},
                         timeout=30)
        assert obs.stdout == "True False\n"


def test_a_module_that_marks_forks_bad_is_named_by_a_second_preload(project, standin_driver):
    # torch sets its bad-fork flag for the children of a process that asked for the
    # device count, even where no driver answered; read once at the end of a preload it
    # names no module, so the server is made again reading it after each import.
    env = {**ENV, "PYTHONPATH": python_path(standin_driver)}
    spec = ScriptSpec(script=project / "s.py", cwd=project, env=env)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        report = runner.start(["torch", "poisons", "json"])
        assert report.isolation is Isolation.FORK
        assert report.modules == ("torch", "json")
        assert [str(d) for d in report.dropped] == [
            "poisons (torch marks forked children as unable to use CUDA (torch.cuda.is_available() or "
            "device_count() was called))"]


# -- never silent -------------------------------------------------------------------
@pytest.fixture(scope="module")
def threaded_site(tmp_path_factory) -> Path:
    """A sitecustomize that starts a thread in every interpreter: no fork server is safe."""
    d = tmp_path_factory.mktemp("threadedsite")
    (d / "sitecustomize.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(1000,), daemon=True, name='site-watcher').start()\n"
    )
    return d


def test_no_fork_server_when_the_interpreter_starts_threaded(project, threaded_site):
    from shrinkgpu.worker import ForkUnavailable

    spec = ScriptSpec(script=project / "s.py", cwd=project, env={**ENV, "PYTHONPATH": str(threaded_site)})
    with Runner(spec, isolation=Isolation.FORK) as runner:
        with pytest.raises(ForkUnavailable, match="thread"):
            runner.start(["json"], required=True)
    with Runner(spec, isolation=Isolation.FORK) as runner:
        report = runner.start(["json"])
        assert report.isolation is Isolation.FRESH and runner.isolation is Isolation.FRESH
        assert "forking is not safe here" in report.note and "site-watcher" in report.note


# -- a candidate's run is a faithful run ---------------------------------------------------
EXIT_WORK = """\
import atexit, tempfile, weakref
kept = tempfile.TemporaryDirectory()          # never closed: its finalizer removes it at exit
made = tempfile.mkdtemp(prefix="probe_ckpt_")  # never removed by the script
print(tempfile.gettempdir(), kept.name, made, flush=True)
class Model: pass
m = Model()
weakref.finalize(m, print, "finalizer ran")
atexit.register(print, "atexit ran")
raise ValueError("bad batch")
"""


@pytest.mark.parametrize("mode", [Isolation.FORK, Isolation.FRESH])
def test_exit_handlers_run_and_temporary_files_land_in_the_runs_directory(numpy_runner, mode, tmp_path):
    import tempfile

    assert tempfile.gettempdir()  # the server preloaded tempfile and may have cached it too
    obs = numpy_runner.run({"s.py": EXIT_WORK}, timeout=60, isolation=mode)
    assert obs.signature is not None and obs.signature.type == "ValueError"
    first, *rest = obs.stdout.splitlines()
    tmpdir, kept, made = (Path(p) for p in first.split())
    assert rest == ["finalizer ran", "atexit ran"] or sorted(rest) == ["atexit ran", "finalizer ran"]
    assert tmpdir.name.startswith("tmp") and tmpdir.parent.name.startswith("run-")
    assert kept.parent == tmpdir and made.parent == tmpdir
    assert not tmpdir.exists()  # gone with the run


LIBRARY_WITH_A_CACHE = """\
import os, shutil, weakref
cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")
os.makedirs(cache, exist_ok=True)
class _Owner: pass
_owner = _Owner()
weakref.finalize(_owner, shutil.rmtree, cache)   # the library's teardown, made at import
"""


def test_finalizers_made_while_preloading_stay_the_supervisors(tmp_path):
    # A forked child that ran them at exit would remove what the supervisor (and every later
    # child) still uses; they are also most of the exit time of a short run (torch makes one
    # per operator library).  The script's own finalizers run (test above).
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "cachelib.py").write_text(LIBRARY_WITH_A_CACHE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "s.py").write_text("pass\n")
    script = "import os, cachelib\nprint(os.path.isdir(cachelib.cache))\n"
    spec = ScriptSpec(script=project / "s.py", cwd=project, env={**ENV, "PYTHONPATH": str(lib)})
    with Runner(spec, isolation=Isolation.FORK) as runner:
        runner.start(["cachelib"], required=True)
        outputs = [runner.run({"s.py": script}, timeout=60).stdout for _ in range(3)]
    assert outputs == ["True\n"] * 3
    assert (lib / "cache").is_dir()


def test_one_copy_of_the_users_directory_per_reduction(tmp_path, monkeypatch):
    import shrinkgpu.reducer as reducer
    import shrinkgpu.reducer.session as session

    made: list[Path] = []

    class Counting(Sandbox):
        def __init__(self, root, **kw):
            made.append(Path(root))
            super().__init__(root, **kw)

    monkeypatch.setattr(session, "Sandbox", Counting)
    (tmp_path / "s.py").write_text("import torch\ntorch.zeros(2).view(3)\n")
    (tmp_path / "weights.bin").write_bytes(b"0" * 1024)
    result = reducer.reduce(
        reducer.ReduceConfig(
            script=tmp_path / "s.py", cwd=tmp_path, keep_error="shape", verify_runs=1, max_tests=5, write=False
        )
    )
    assert made == [tmp_path.resolve()]
    assert result.isolation is Isolation.FORK


# -- a fork server without torch is never a silent one ------------------------------------
def test_a_fork_server_that_had_to_drop_torch_says_so_in_the_first_lines(tmp_path):
    import subprocess

    # An import hook (as some profilers and monitoring agents install) that starts a
    # thread when torch is imported: torch cannot be preloaded, everything else can.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(
        """\
        import sys, threading, time

        class _WatchTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    threading.Thread(target=time.sleep, args=(1000,), daemon=True, name="torch-agent").start()
                return None

        sys.meta_path.insert(0, _WatchTorch())
        """
    ))
    work = tmp_path / "work"
    work.mkdir()
    (work / "s.py").write_text("import torch\nx = 1\ntorch.zeros(2).view(3)\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-m", "shrinkgpu", "reduce", "s.py", "-k", "invalid", "-j", "1", "--confirm", "0"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    reducing = next(i for i, line in enumerate(lines) if "reducing" in line)
    first = "\n".join(lines[:reducing])  # said before the search starts
    assert "fork server ready" in first
    # torch itself is named, once (not each of its submodules in turn until the server
    # gives up), and the server still forks with everything else preloaded.
    assert "not preloaded, because forking after importing them is unsafe (each candidate imports them " \
           "itself, which is slower): torch (1 other thread(s) keep running across fork ('torch-agent'))" in first
    # the server's own reason, not a guess at the usual cause
    assert ("is not preloaded: each candidate imports it itself (seconds instead of milliseconds). Forking after "
            "importing it is unsafe here: 1 other thread(s) keep running across fork ('torch-agent').") in first
    assert "fresh interpreter: expect seconds" not in first
    assert (work / "s.min.py").read_text().strip().endswith("torch.zeros(2).view(3)")
    # the report says how the candidates ran, as it was
    report = (work / "s.min.md").read_text()
    assert ("; torch not preloaded (1 other thread(s) keep running across fork ('torch-agent')): each candidate "
            "imported it;") in report
