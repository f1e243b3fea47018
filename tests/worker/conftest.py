"""The fork server with torch preloaded that most worker tests run their scripts in
(``fork_runner``), for the user's project of tests/worker/helpers.py.  Package-scoped:
started once per test process for all of tests/worker/, as it was once per module
when these tests were one file.  And a fake CUDA driver (``fake_driver``) for the
fork-safety checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from shrinkgpu.worker import Isolation, Runner, ScriptSpec
from worker.helpers import ARGS, ARGV0, ENV, LEAK_MARKER, ORIGINAL_FILES, STDIN, make_project, snapshot


@pytest.fixture(scope="package")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    make_project(root, ORIGINAL_FILES)
    return root


@pytest.fixture(scope="package")
def spec(project) -> ScriptSpec:
    return ScriptSpec(
        script=project / "s.py", args=ARGS, cwd=project / "work", env=ENV, stdin=STDIN, argv0=ARGV0
    )


@pytest.fixture(scope="package")
def pristine(project, spec) -> dict:
    """The user's directory before any run."""
    return snapshot(project)


@pytest.fixture(scope="package")
def fork_runner(spec, pristine):
    # Something only the reducer's own environment holds: no candidate may see it.
    os.environ[LEAK_MARKER] = "1"
    runner = Runner(spec, isolation=Isolation.FORK)
    try:
        runner.start(["torch"])
    finally:
        os.environ.pop(LEAK_MARKER, None)
    yield runner
    runner.close()


@pytest.fixture(scope="package")
def standin_driver(tmp_path_factory) -> Path:
    """A directory holding a stand-in CUDA driver (tests/data/standin_driver/libcuda.c,
    built here: it remembers whether ``cuInit`` ran, as the real one does) and modules
    that touch it the ways libraries do at import: one maps it (as a CUDA build of torch
    does through cuBLASLt), one initialises it, one asks torch for CUDA, one marks forks
    as bad the way torch does without the driver (a CPU build has no such flag)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver")
    d = tmp_path_factory.mktemp("standindriver")
    source = Path(__file__).parent.parent / "data" / "standin_driver" / "libcuda.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(source)], check=True)
    (d / "touchcuda.py").write_text("import ctypes\nctypes.CDLL('libcuda.so.1')\n")
    (d / "initcuda.py").write_text("import ctypes\nctypes.CDLL('libcuda.so.1').cuInit(0)\n")
    (d / "asks_cuda.py").write_text("import torch\nAVAILABLE = torch.cuda.is_available()\n")
    # torch registers an atfork handler that sets this flag in every child once the
    # device count was asked for; the same, standing in for it on any build.
    (d / "poisons.py").write_text(
        "import os, torch\n"
        "torch._C._cuda_isInBadFork = lambda: False\n"
        "def _bad():\n"
        "    torch._C._cuda_isInBadFork = lambda: True\n"
        "os.register_at_fork(after_in_child=_bad)\n"
    )
    return d

