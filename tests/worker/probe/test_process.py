"""probe/process.py with real processes: a candidate's process looks like ``python
SCRIPT ARGS`` run from the user's directory (argv, cwd, ``__main__``, environment,
stdin, threads, random state), forked or fresh alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shrinkgpu.signature import Frame
from shrinkgpu.worker import Isolation, Observation, Runner, ScriptSpec
from worker.helpers import ARGS, ARGV0, CE_CALL, ENV, LEAK_MARKER, STDIN, line_of, run


def plain_interpreter(env: dict[str, str], cwd: Path) -> dict:
    """What a plain ``python`` (no shrinkgpu, no torch) sees with this environment."""
    code = "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'path': sys.path}))"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, check=True)
    return json.loads(done.stdout)


FACTS = """\
import os, sys
threads_at_start = len(os.listdir("/proc/self/task"))
import json, random
import torch
import torch.nn.functional as F
import helper
facts = {
    "threads": threads_at_start,
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "cwd": os.getcwd(),
    "file": __file__,
    "name": __name__,
    "path": sys.path,
    "env": dict(os.environ),
    "stdin": sys.stdin.buffer.read().hex(),
    "listing": sorted(os.listdir(".")),
    "data": open("data.txt").read(),
    "helper": helper.VALUE,
    "cuda_initialized": torch.cuda.is_initialized(),
    "torch_seed": torch.initial_seed(),
    "torch_rand": torch.rand(1).item(),
    "py_rand": random.random(),
}
print(json.dumps(facts), flush=True)
F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))
"""


def parse_facts(obs: Observation) -> dict:
    assert obs.infra_error is None, obs.infra_error
    return json.loads(obs.stdout.strip().splitlines()[0])


@pytest.fixture(scope="module")
def fork_facts(fork_runner):
    obs = fork_runner.run({"s.py": FACTS}, timeout=30)
    return obs, parse_facts(obs)


@pytest.fixture(scope="module")
def fresh_facts(fork_runner):
    """Two fresh-interpreter runs of FACTS, side by side (they cost seconds each)."""
    futures = [fork_runner.submit({"s.py": FACTS}, timeout=60, isolation=Isolation.FRESH) for _ in range(2)]
    return [(f.result(), parse_facts(f.result())) for f in futures]


@pytest.fixture(params=["fork", "fresh"])
def facts(request, fork_facts, fresh_facts):
    return fork_facts if request.param == "fork" else fresh_facts[0]


# -- what the script sees --------------------------------------------------------------
def test_script_sees_argv_exactly_as_typed_including_the_error_text(facts):
    obs, seen = facts
    assert seen["argv"] == [ARGV0, *ARGS]
    assert seen["orig_argv"] == [sys.executable, ARGV0, *ARGS]
    # The script failed with its own error, not with a usage error about its argv.
    assert obs.signature.op.name == "torch.nn.functional.cross_entropy"


def test_cwd_is_the_sandbox_copy_of_the_users_cwd(facts, project):
    _, seen = facts
    cwd = Path(seen["cwd"])
    assert cwd.name == "work" and cwd.is_absolute()
    assert not cwd.resolve().is_relative_to(project.resolve())
    assert cwd.parent == Path(seen["file"]).parent  # the copy keeps the user's layout
    assert seen["listing"] == ["data.txt", "keep.bin", "old.txt"]
    assert seen["data"] == "original data\n"
    # not the user's files: the run's copy, reset for the next run (see
    # test_each_run_starts_from_the_users_files_whatever_the_run_before_left)


def test_script_runs_as_main_with_absolute_file_and_its_directory_first_on_path(facts, project, spec):
    _, seen = facts
    assert seen["name"] == "__main__"
    assert os.path.isabs(seen["file"]) and seen["file"].endswith("/s.py")
    assert seen["path"][0] == os.path.dirname(seen["file"])
    assert seen["helper"] == 41  # helper.py beside the script is importable
    plain = plain_interpreter(ENV, spec.cwd)
    assert seen["path"][1:] == plain["path"][1:]


def test_environment_is_spec_env_as_python_sees_it_but_tmpdir_names_the_runs_own(facts, spec):
    _, seen = facts
    env = dict(seen["env"])
    # What the script leaves in its temporary directory goes with the run.
    tmpdir = Path(env.pop("TMPDIR"))
    assert tmpdir.parent == Path(seen["cwd"]).parent.parent  # run-N/tmp-M beside run-N/root
    assert not tmpdir.exists()
    # torch.compile's caches are the run's own too (test_each_run_compiles_into_caches_of_its_own)
    assert env.pop("TORCHINDUCTOR_CACHE_DIR") == str(tmpdir / "torchinductor")
    assert env.pop("TRITON_CACHE_DIR") == str(tmpdir / "triton")
    assert env == plain_interpreter(ENV, spec.cwd)["env"]
    # Everything else beyond spec.env is Python's own locale coercion, not shrinkgpu's.
    assert set(env) - set(ENV) <= {"LC_CTYPE"}
    assert LEAK_MARKER not in seen["env"] and "PYTEST_CURRENT_TEST" not in seen["env"]


def test_stdin_bytes_are_what_the_script_reads(facts):
    _, seen = facts
    assert bytes.fromhex(seen["stdin"]) == STDIN


def test_fork_and_fresh_isolation_record_the_same_signature(fork_facts, fresh_facts):
    fork_obs, _ = fork_facts
    for fresh_obs, _ in fresh_facts:
        assert fresh_obs.signature == fork_obs.signature
        assert fresh_obs.signature.same_bug(fork_obs.signature)
        assert fresh_obs.signature.frame == Frame("s.py", line_of(FACTS, "F.cross_entropy("), "<module>", CE_CALL)


def test_relative_argv0_is_kept_verbatim(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=tmp_path / "s.py", args=("a",), cwd=tmp_path, env=ENV, argv0="./s.py")
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        obs = run(runner, "import sys, json; print(json.dumps(sys.argv))")
    assert json.loads(obs.stdout) == ["./s.py", "a"]


# -- fork safety and preloading ---------------------------------------------------------
def test_fork_child_starts_single_threaded_without_cuda_and_with_torch_preloaded(fork_runner, fork_facts):
    report = fork_runner.preload_report
    assert (report.modules, report.dropped, report.isolation) == (("torch",), (), Isolation.FORK)
    obs, seen = fork_facts
    assert seen["threads"] == 1
    assert seen["cuda_initialized"] is False
    assert obs.wall < 2.0  # a fork, not an interpreter that imports torch


# -- random state ----------------------------------------------------------------------------
def test_fork_children_do_not_share_pythons_random_stream(fork_runner, fork_facts):
    _, seen = fork_facts
    again = [float(run(fork_runner, "import random; print(random.random())").stdout) for _ in range(2)]
    assert len({seen["py_rand"], *again}) == 3


def test_fresh_interpreters_seed_torchs_cpu_generator_differently_each_time(fresh_facts):
    """The premise of the next test: on CPU, torch seeds its default generator from the
    OS in every new process (not from a fixed seed), so an unseeded script is not
    reproducible between fresh interpreters."""
    (_, one), (_, two) = fresh_facts
    assert one["torch_seed"] != two["torch_seed"]
    assert one["torch_rand"] != two["torch_rand"]


def test_fork_children_draw_torch_random_numbers_like_fresh_interpreters(fork_runner, fork_facts):
    """Resetting the generator to the supervisor's ``initial_seed()`` (as the probe once
    did) would give every fork child the same stream: an unseeded candidate would look
    reproducible during reduction and be flaky afterwards."""
    _, seen = fork_facts
    again = [float(run(fork_runner, "import torch; print(torch.rand(1).item())").stdout) for _ in range(2)]
    assert len({seen["torch_rand"], *again}) == 3
