"""The fork server with torch preloaded that most worker tests run their scripts in
(``fork_runner``), for the user's project of tests/worker/helpers.py.  Package-scoped:
started once per test process for all of tests/worker/, as it was once per module
when these tests were one file.  And a fake CUDA driver (``fake_driver``) for the
fork-safety checks.
"""

from __future__ import annotations

import os
import shutil
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


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> Path:
    """A directory holding a shared object named like the CUDA driver (any loadable ELF
    object does: what is checked is that a library of that name is in the process)."""
    import _bz2

    d = tmp_path_factory.mktemp("fakedriver")
    shutil.copy(_bz2.__file__, d / "libcuda.so.1")
    (d / "touchcuda.py").write_text("import ctypes\nctypes.CDLL('libcuda.so.1')\n")
    (d / "asks_cuda.py").write_text("import torch\nAVAILABLE = torch.cuda.is_available()\n")
    return d
