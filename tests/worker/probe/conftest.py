"""A fork server with torch, yaml and json preloaded for a project that holds
configuration files (``runner``): what the tests of what a run records use.
Package-scoped: started once per test process for all of tests/worker/probe/.
"""

from __future__ import annotations

import os

import pytest

from shrinkgpu.worker import Isolation, Runner, ScriptSpec

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
       "DATA_ROOT": "/srv/datasets/har"}


@pytest.fixture(scope="package")
def runner(tmp_path_factory):
    root = tmp_path_factory.mktemp("facts")
    (root / "s.py").write_text("pass\n")
    (root / "config.yaml").write_text("model:\n  in_channels: 3\n  hidden: [32, 64]\nseed: 1\n")
    (root / "config.json").write_text('{"lr": 0.1, "root": "/srv/datasets/har"}')
    spec = ScriptSpec(script=root / "s.py", cwd=root, env=ENV)
    with Runner(spec, isolation=Isolation.FORK) as r:
        r.start(["torch", "yaml", "json"])
        yield r
