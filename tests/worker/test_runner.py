"""runner.py: what it hands an executor for each run (with fake executors, no process),
then with real processes the modules worth preloading, candidates run side by side, and
the compile caches each run starts from (with Inductor's compile workers too:
tests/features/test_inductor_isolation.py).  What a run records and how it is run are
tested with the modules that do it (tests/worker/probe/, test_supervisor.py,
test_sandbox.py, test_executors.py).
"""

from __future__ import annotations

import os
import textwrap
import time
from concurrent.futures import wait
from pathlib import Path

import pytest

from fakes import Log, bug, executors
from shrinkgpu.signature import TensorMeta
from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch, preload_candidates
from worker.helpers import HEADER, run, script


# -- the seam: what the runner hands an executor, and which executor runs what ------------------
def test_the_runner_hands_each_run_to_its_executor_as_the_user_would_start_it(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    (tmp_path / "data.txt").write_text("rows\n")
    log = Log()
    spec = ScriptSpec(script=tmp_path / "s.py", args=("--n", "2"), cwd=tmp_path, argv0="s.py", env={"HOME": "/h"})
    with Runner(spec, threads=1, executors=executors(lambda t, j: bug(), log)) as runner:
        runner.start(["torch"])
        runner.run({"s.py": "print(1)\n"}, timeout=5, watch=Watch(count_loops=True), env={"CUDA_VISIBLE_DEVICES": "1"})
        runner.run({"s.py": "print(2)\n"}, timeout=5, isolation=Isolation.FRESH)
    (forked, first), (fresh, second) = log.jobs
    assert (forked, fresh) == (Isolation.FORK, Isolation.FRESH)  # a fresh run beside the fork server
    assert log.texts == ["print(1)\n", "print(2)\n"]
    assert first.request.argv == ("s.py", "--n", "2")
    assert first.request.cwd == str(first.run.root) and first.request.watch.count_loops
    assert first.env["CUDA_VISIBLE_DEVICES"] == "1" and first.env["TMPDIR"] == str(first.run.tmp)
    assert first.env["OMP_NUM_THREADS"] == "1"  # the thread cap travels with every run
    assert not second.request.watch.count_loops
    assert not first.run.path.exists()  # released when the run was over


def test_a_refused_fork_server_leaves_fresh_interpreters_with_the_reason(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    log = Log()
    make = executors(lambda t, j: bug(), log, refuse_fork="a thread was running")
    with Runner(ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path), executors=make) as runner:
        report = runner.start(["torch"])
        runner.run({"s.py": "pass\n"}, timeout=5)
    assert report.isolation is Isolation.FRESH and runner.isolation is Isolation.FRESH
    assert "forking is not safe here (a thread was running)" in report.note
    assert [str(d) for d in report.dropped] == ["badmod (started a thread)"]
    assert [mode for mode, _ in log.jobs] == [Isolation.FRESH]


# -- preload_candidates --------------------------------------------------------------------
@pytest.fixture(scope="module")
def module_run(fork_runner):
    return run(fork_runner, "import colorsys, helper, mypkg, torch\n", collect_modules=True)


def test_preload_candidates_keep_installed_modules_and_skip_the_users_own(module_run, project):
    modules = {name: (file, local) for name, file, local in module_run.modules}
    assert modules["helper"][1] == "helper.py"
    assert modules["mypkg"][1] == "mypkg/__init__.py"
    assert modules["__main__"][1] == "s.py"
    candidates = preload_candidates(module_run.modules, [project])
    assert candidates == preload_candidates(module_run.modules)
    assert {"torch", "torch.nn.functional", "colorsys"} <= set(candidates)
    assert not {"helper", "mypkg", "__main__"} & set(candidates)
    assert not [m for m in candidates if m.startswith("shrinkgpu")]
    assert len(candidates) == len(set(candidates))


def test_a_virtual_environment_inside_the_users_directory_is_still_preloaded(module_run, monkeypatch):
    # ``python -m venv .venv`` in the project and ``shrinkgpu reduce`` from its root: the
    # root is the user's directory, and torch lives inside it.  Simulated by calling the
    # directory that holds this interpreter's site-packages the user's.
    import sysconfig

    import shrinkgpu.worker.runner as runner_module

    site_dir = Path(sysconfig.get_paths()["purelib"]).resolve()
    enclosing = site_dir.parent  # lib/python3.X: a directory with an installed path inside it
    candidates = preload_candidates(module_run.modules, [enclosing])
    assert {"torch", "torch.nn.functional"} <= set(candidates)
    # The site-packages directory itself named as the user's (a script edited in place
    # there) keeps its modules out: they are the user's files then.
    monkeypatch.setattr(runner_module, "installed_paths", lambda: (str(site_dir),))
    assert "torch" not in preload_candidates(module_run.modules, [site_dir])


def test_no_installed_module_is_reported_as_a_local_file(module_run):
    local = {name: rel for name, _file, rel in module_run.modules if rel is not None}
    assert set(local) == {"__main__", "helper", "mypkg"}


# -- parallel candidates ------------------------------------------------------------------------
def test_parallel_submits_each_get_their_own_observation(fork_runner):
    texts = [
        "import time; time.sleep(0.5); print('zero'); raise ValueError('v0')",
        "import os, time; time.sleep(0.5); os._exit(3)",
        HEADER + "import time; time.sleep(0.5)\nF.cross_entropy(torch.randn(2, 4), torch.tensor([0, 4]))\n",
        "import os, time; time.sleep(0.5); print(os.getcwd())",
    ]
    started = time.monotonic()
    futures = [fork_runner.submit(script(t), timeout=20) for t in texts]
    _, pending = wait(futures, timeout=20)
    elapsed = time.monotonic() - started
    assert not pending
    zero, three, ce, clean = (f.result() for f in futures)
    assert elapsed < 1.6  # four half-second candidates ran side by side
    assert zero.stdout == "zero\n" and (zero.signature.type, zero.signature.message) == ("ValueError", "v0")
    assert (three.status, three.exit_code, three.signature) == ("no-report", 3, None)
    assert ce.signature.op.name == "torch.nn.functional.cross_entropy"
    assert ce.signature.op.tensors == (
        TensorMeta("args[0]", "float32", (2, 4), (4, 1), "cpu"),
        TensorMeta("args[1]", "int64", (2,), (1,), "cpu"),
    )
    assert (clean.status, clean.exit_code, clean.signature) == ("ok", 0, None)
    assert Path(clean.stdout.strip()).name == "work"
    assert all(f.result().wall >= 0.5 for f in futures)


def test_each_run_compiles_into_caches_of_its_own(project, tmp_path):
    # Even where the user's environment names one: an artifact compiled for one candidate
    # must never make another pass or fail.
    shared = tmp_path / "shared-cache"
    spec = ScriptSpec(script=project / "s.py", cwd=project / "work",
                      env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(shared), "TRITON_CACHE_DIR": str(shared)})
    text = textwrap.dedent("""\
        import os, tempfile
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        inductor = cache_dir()
        assert inductor.startswith(tempfile.gettempdir()), (inductor, tempfile.gettempdir())
        assert os.environ["TRITON_CACHE_DIR"].startswith(tempfile.gettempdir())
        raise SystemExit(inductor)
        """)
    with Runner(spec, isolation=Isolation.FRESH) as runner:
        runner.start()
        first, second = (run(runner, text) for _ in range(2))
    assert first.signature is not None and second.signature is not None, (first.stderr, second.stderr)
    assert first.signature.type == second.signature.type == "SystemExit"
    assert first.signature.message != second.signature.message  # two runs, two caches
    assert not Path(first.signature.message).exists()  # gone with the run
    assert not shared.exists()
