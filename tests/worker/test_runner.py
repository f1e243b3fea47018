"""The worker layer with real processes, through the Runner: fork server, fresh
interpreters, sandbox and the probe.

Nothing here is mocked.  One fork server with torch preloaded (``fork_runner``) serves
most tests; each test writes its own script text under the same file name through the
``files`` mapping.  Fresh interpreters cost seconds, so the few fresh runs are made once
(``fresh_facts``) and shared.  Tests about process trees use servers that do not import
torch (``capture_ops=False``), which start in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import wait
from pathlib import Path

import psutil
import pytest

from shrinkgpu.signature import Family, Frame, TensorMeta
from shrinkgpu.worker import Isolation, Observation, Runner, ScriptSpec, Watch, preload_candidates

# What the user typed: ``cd project/work && python ../s.py ARGS < stdin``.  The
# arguments carry the error text on purpose (a worker whose argv held the reducer's
# command line once made argparse echo it and fake a match).
ARGV0 = "../s.py"
ARGS = ("--lr", "0.1", "IndexError: Target 4 is out of bounds.", "--note=device-side assert triggered")
STDIN = b"first line\nTarget 4 is out of bounds.\n\x00\xff\xfe last"
ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/root"),
    "SHRINK_TEST_VALUE": "spaces, = and\na newline: Target 4",
}
LEAK_MARKER = "SHRINKGPU_TEST_REDUCER_ONLY"

CE_CALL = "F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))"
CE_TENSORS = (
    TensorMeta("args[0]", "float32", (3, 4), (4, 1), "cpu"),
    TensorMeta("args[1]", "int64", (3,), (1,), "cpu"),
)
HEADER = "import sys\nimport torch\nimport torch.nn.functional as F\n"

ORIGINAL_FILES = {
    "s.py": "print('the original, never run by these tests')\n",
    "helper.py": "VALUE = 41\n",
    "mypkg/__init__.py": "NAME = 'mypkg'\n",
    "work/data.txt": "original data\n",
    "work/old.txt": "to be deleted by a candidate\n",
    "work/keep.bin": bytes(range(256)) * 4,
}


# -- helpers ----------------------------------------------------------------------------
def script(text: str) -> dict[str, str]:
    return {"s.py": textwrap.dedent(text)}


def line_of(text: str, needle: str) -> int:
    """1-based number of the line of ``text`` that contains ``needle``."""
    for number, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in script")


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``root`` with its bytes, mode and mtime; every directory."""
    out: dict[str, tuple[bytes, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            data = path.read_bytes() if path.is_file() else b"<dir>"
            out[str(path.relative_to(root))] = (data, st.st_mode, st.st_mtime_ns)
    return out


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids, timeout: float = 2.0) -> list[int]:
    """Poll until every pid has ended (or is a zombie); return those still alive."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not gone(p)]
        if alive:
            time.sleep(0.05)
    return [p for p in alive if not gone(p)]


def read_pids(path: Path, count: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pids = [int(x) for x in path.read_text().split()]
        except (FileNotFoundError, ValueError):
            pids = []
        if len(pids) == count:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} pids")


def kill_quietly(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if not gone(p.pid)}


def plain_interpreter(env: dict[str, str], cwd: Path) -> dict:
    """What a plain ``python`` (no shrinkgpu, no torch) sees with this environment."""
    code = "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'path': sys.path}))"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, check=True)
    return json.loads(done.stdout)


def make_project(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        os.chmod(path, 0o644)


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    make_project(root, ORIGINAL_FILES)
    return root


@pytest.fixture(scope="module")
def spec(project) -> ScriptSpec:
    return ScriptSpec(
        script=project / "s.py", args=ARGS, cwd=project / "work", env=ENV, stdin=STDIN, argv0=ARGV0
    )


@pytest.fixture(scope="module")
def pristine(project, spec) -> dict:
    """The user's directory before any run."""
    return snapshot(project)


@pytest.fixture(scope="module")
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


def run(runner: Runner, text: str, timeout: float = 20.0, isolation: Isolation | None = None, **watch) -> Observation:
    """One run of ``text``; ``watch``: what it records beyond its first error (``Watch``'s fields)."""
    return runner.run(script(text), timeout=timeout, isolation=isolation, watch=Watch(**watch))


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


@pytest.fixture(scope="module")
def plain_runner(tmp_path_factory):
    """A fork server without torch, for process-tree tests (starts in ~0.1 s)."""
    root = tmp_path_factory.mktemp("plain")
    (root / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=root / "s.py", cwd=root, env=ENV)
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        yield runner


@pytest.fixture(scope="module")
def libdir(tmp_path_factory) -> Path:
    lib = tmp_path_factory.mktemp("lib")
    (lib / "threadmod.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(100,), daemon=True).start()\n"
    )
    (lib / "envmod.py").write_text("import os\nos.environ['ENVMOD_WAS_HERE'] = '1'\n")
    return lib


@pytest.fixture(scope="module")
def preload_runner(tmp_path_factory, libdir):
    """A fork server asked to preload a module that starts a thread at import time."""
    root = tmp_path_factory.mktemp("preload")
    (root / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=root / "s.py", cwd=root, env={**ENV, "PYTHONPATH": str(libdir)})
    with Runner(spec, capture_ops=False) as runner:
        runner.start(["threadmod", "envmod", "json"])
        yield runner


# -- 1. the signature of a failing script -----------------------------------------------
def test_failing_script_signature_has_root_class_message_operator_tensors_and_user_frame(fork_runner):
    text = HEADER + "x = 1\nloss = " + CE_CALL + "\nprint('not reached')\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code, obs.signal, obs.timed_out) == ("exception", 1, None, False)
    sig = obs.signature
    assert sig.type == "IndexError"
    assert sig.message == "Target 4 is out of bounds."
    assert sig.normalized == "Target <n> is out of bounds."
    assert sig.family is Family.INDEX
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert sig.op.tensors == CE_TENSORS
    assert "kwargs['ignore_index'] = -100" in sig.op.others
    assert sig.frame == Frame(file="s.py", line=5, function="<module>", source="loss = " + CE_CALL)
    assert sig.caught_earlier == ()
    assert obs.failed and obs.describe() == "IndexError: Target 4 is out of bounds."
    assert "not reached" not in obs.stdout
    assert obs.stderr.rstrip().endswith("IndexError: Target 4 is out of bounds.")


@pytest.mark.parametrize(
    "call, kind, message, op, tensors",
    [
        (
            "torch.randn(4, 6).t().view(24)",
            "RuntimeError",
            "view size is not compatible with input tensor's size and stride",
            "Tensor.view",
            (TensorMeta("args[0]", "float32", (6, 4), (1, 6), "cpu"),),
        ),
        (
            "torch.gather(torch.randn(2, 3), 1, torch.tensor([[5], [0]]))",
            "RuntimeError",
            "index 5 is out of bounds for dimension 1 with size 3",
            "torch.gather",
            (
                TensorMeta("args[0]", "float32", (2, 3), (3, 1), "cpu"),
                TensorMeta("args[2]", "int64", (2, 1), (1, 1), "cpu"),
            ),
        ),
        (
            "torch.nn.Linear(5, 3)(torch.randn(2, 4))",
            "RuntimeError",
            "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)",
            "torch._C._nn.linear",
            (
                TensorMeta("args[0]", "float32", (2, 4), (4, 1), "cpu"),
                TensorMeta("args[1]", "float32", (3, 5), (5, 1), "cpu"),
                TensorMeta("args[2]", "float32", (3,), (1,), "cpu"),
            ),
        ),
        (
            "torch.nn.Embedding(3, 2)(torch.tensor([3]))",
            "IndexError",
            "index out of range in self",
            "torch.nn.functional.embedding",
            (
                TensorMeta("args[0]", "int64", (1,), (1,), "cpu"),
                TensorMeta("args[1]", "float32", (3, 2), (2, 1), "cpu"),
            ),
        ),
    ],
    ids=["view", "gather", "linear", "embedding"],
)
def test_suspect_operator_is_the_python_api_call_with_its_real_tensor_metadata(
    fork_runner, call, kind, message, op, tensors
):
    obs = run(fork_runner, HEADER + call + "\n")
    sig = obs.signature
    assert sig.type == kind
    assert sig.message.startswith(message)
    assert sig.op.name == op
    assert sig.op.tensors == tensors
    assert sig.frame == Frame("s.py", 4, "<module>", call)


# -- 2. wrapper chains -------------------------------------------------------------------
CHAINS = {
    "raise-from": f"""\
        class Wrapper(Exception):
            pass
        try:
            {CE_CALL}
        except IndexError as e:
            raise Wrapper("training step failed") from e
        """,
    "implicit-context": f"""\
        try:
            {CE_CALL}
        except IndexError:
            raise RuntimeError("while handling: logging failed")
        """,
    "error-in-finally": f"""\
        try:
            {CE_CALL}
        finally:
            raise OSError("could not write the checkpoint")
        """,
    "harmless-root": f"""\
        try:
            open("missing.ckpt")
        except FileNotFoundError:
            {CE_CALL}
        """,
}


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_root_of_a_wrapper_chain_is_the_torch_error(fork_runner, case):
    text = HEADER + textwrap.dedent(CHAINS[case])
    obs = run(fork_runner, text)
    assert obs.status == "exception" and obs.exit_code == 1
    sig = obs.signature
    assert (sig.type, sig.message) == ("IndexError", "Target 4 is out of bounds.")
    assert sig.op.name == "torch.nn.functional.cross_entropy"
    assert sig.op.tensors == CE_TENSORS
    assert sig.frame == Frame("s.py", line_of(text, CE_CALL), "<module>", CE_CALL)


def test_raise_from_none_ends_the_chain_as_python_shows_it_and_keeps_what_it_hid(fork_runner):
    text = HEADER + textwrap.dedent(f"""\
        try:
            {CE_CALL}
        except IndexError:
            raise ValueError("bad batch") from None
        """)
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("ValueError", "bad batch", None)
    assert sig.frame.source == 'raise ValueError("bad batch") from None'
    assert sig.suppressed == "IndexError: Target 4 is out of bounds."
    assert sig.keep_text().splitlines() == ["ValueError: bad batch", "IndexError: Target 4 is out of bounds."]


def test_raise_from_e_keeps_the_cause_as_the_first_error_and_hides_nothing(fork_runner):
    text = HEADER + textwrap.dedent(CHAINS["raise-from"])
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.suppressed) == ("IndexError", None)


def test_a_weights_only_load_of_an_array_is_the_error_torch_shows(fork_runner, tmp_path):
    text = textwrap.dedent("""\
        import numpy as np
        import torch
        torch.save({"rows": np.arange(3)}, "rows.pt")
        torch.load("rows.pt")
        """)
    sig = run(fork_runner, text).signature
    assert sig.type == "_pickle.UnpicklingError" and sig.message.startswith("Weights only load failed.")
    assert sig.suppressed.startswith("_pickle.UnpicklingError: Unsupported global: GLOBAL numpy")
    assert "WeightsUnpickler error: Unsupported global" in sig.message  # its continuation lines


def test_the_shapes_an_operator_had_across_the_run_are_recorded_for_the_one_that_raised(fork_runner):
    text = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        table = torch.randn(4, 3)  # rows 0..3; the loop appends a 4 at step 4
        context = torch.tensor([[0]])
        for step in range(6):
            F.relu(table)
            F.embedding(context, table)
            context = torch.cat([context, torch.tensor([[step]])], dim=1)
        """)
    obs = run(fork_runner, text, op_shapes=True)
    assert obs.signature.op.name == "torch.nn.functional.embedding"
    assert obs.signature.op.tensors[0].shape == (1, 6)
    # the calls that returned; the one that raised (length 6) is no evidence of its own
    assert obs.op_shapes == {"torch.nn.functional.embedding": {
        "args[0]": tuple((1, n) for n in range(1, 6)), "args[1]": ((4, 3),)}}
    assert run(fork_runner, text).op_shapes == {}  # only when asked


def test_the_shapes_of_another_layers_calls_of_the_operator_are_not_the_failing_ones(fork_runner):
    # Two layers call F.linear with inputs 32 and 16 wide; under a transform that drops
    # the batch, the first layer gets 8 features.  The width varied across F.linear's
    # calls, but only because the layers differ: the first layer always had 32.
    text = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        net = nn.Sequential(nn.Linear(32, 16), nn.Linear(16, 4))
        for n in (64, 64, 40):
            net(torch.randn(n, 32))
        net(torch.randn(64, 4, 8).flatten(0, 1))
        """)
    obs = run(fork_runner, text, op_shapes=True)
    assert obs.signature.op.name == "torch._C._nn.linear"
    assert obs.signature.op.tensors[0].shape == (256, 8)
    assert obs.op_shapes == {"torch._C._nn.linear": {
        "args[0]": ((40, 32), (64, 32)), "args[1]": ((16, 32),), "args[2]": ((16,),)}}
    from shrinkgpu.signature import varying_dims
    assert varying_dims(obs.signature.op, obs.op_shapes["torch._C._nn.linear"]) == {("args[0]", 0)}


def test_sys_exit_in_an_except_handler_keeps_the_original_error_as_root(fork_runner):
    text = HEADER + f"try:\n    {CE_CALL}\nexcept Exception as e:\n    print('error:', e)\n    sys.exit(1)\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code) == ("exit", 1)
    assert obs.stdout == "error: Target 4 is out of bounds.\n"
    sig = obs.signature
    assert (sig.type, sig.message, sig.op.name) == (
        "IndexError",
        "Target 4 is out of bounds.",
        "torch.nn.functional.cross_entropy",
    )
    assert sig.frame.line == 5


def test_without_a_torch_error_the_root_is_the_deepest_exception_of_the_chain(fork_runner):
    text = "d = {}\ntry:\n    d['k']\nexcept KeyError as e:\n    raise RuntimeError('wrap') from e\n"
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("KeyError", "'k'", None)
    assert sig.frame == Frame("s.py", 3, "<module>", "d['k']")


LOOPED = """\
import torch

def lookup(table, i):
    return table[i]

def run(rows):
    for epoch in range(3):
        for step, row in enumerate(
            rows
        ):
            if epoch == 1 and step == 4:
                lookup(row, 9)

rows = [torch.zeros(3)] * 6
for k in range(2):
    pass
run(rows)
"""


def test_count_loops_gives_the_iteration_of_each_loop_around_the_failure(fork_runner):
    obs = run(fork_runner, LOOPED, count_loops=True)
    assert obs.signature.type == "IndexError"
    # epoch 1, step 4 (a header over three lines counts once per iteration); the
    # finished ``for k`` loop is not around the failure
    assert obs.loops == (("s.py", 7, 1), ("s.py", 8, 4))
    # off by default: candidates pay nothing for it
    assert run(fork_runner, LOOPED).loops == ()


def test_count_loops_names_the_call_of_the_function_the_failure_came_in(fork_runner):
    # validation during training calls ``evaluate`` twice; the test set, the third time, fails
    text = ("def evaluate(rows):\n    for r in rows:\n        [0, 1][r]\n\n"
            "evaluate([0]); evaluate([1])\nfor epoch in range(2):\n    pass\nevaluate([0, 5])\n")
    obs = run(fork_runner, text, count_loops=True)
    assert obs.signature.type == "IndexError"
    assert obs.loops == (("s.py", 2, 1),)
    assert obs.loop_calls == (("s.py", 2, 3),)


def test_count_loops_sees_loops_of_a_python_error_unwound_through_frames(fork_runner):
    text = "def f(i):\n    return [1][i]\n\nfor i in range(5):\n    if i == 3:\n        f(i)\n"
    obs = run(fork_runner, text, count_loops=True)
    assert obs.signature.type == "IndexError" and obs.signature.op is None
    assert obs.loops == (("s.py", 4, 3),)


# -- 3. torch errors the script caught ---------------------------------------------------
def test_caught_torch_error_then_normal_end_is_not_a_failure(fork_runner):
    """What the code does: the run is "ok" and the caught error is not exposed at all
    (the probe records it in ``torch_errors``, but Observation keeps it only as
    ``caught_earlier`` of a later failure)."""
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    print('skipped a bad batch')\n"
    obs = run(fork_runner, text)
    assert (obs.status, obs.exit_code, obs.signal) == ("ok", 0, None)
    assert obs.signature is None and not obs.failed
    assert obs.stdout == "skipped a bad batch\n"
    assert obs.describe() == "finished without error (exit status 0)"


def test_caught_torch_error_is_noted_when_a_different_error_ends_the_run(fork_runner):
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    pass\nraise ValueError('later')\n"
    sig = run(fork_runner, text).signature
    assert (sig.type, sig.message, sig.op) == ("ValueError", "later", None)
    assert sig.frame == Frame("s.py", 8, "<module>", "raise ValueError('later')")
    assert sig.caught_earlier == ("IndexError: Target 4 is out of bounds. in torch.nn.functional.cross_entropy",)


def test_a_caught_error_with_the_same_class_and_message_is_the_first_error(fork_runner):
    """CUDA's sticky errors: the script caught the first report and died at a later
    call with the same error; the earlier call is the suspect."""
    later = "F.cross_entropy(torch.randn(5, 4), torch.tensor([4, 0, 0, 0, 0]))"
    text = HEADER + f"try:\n    {CE_CALL}\nexcept IndexError:\n    pass\n{later}\n"
    sig = run(fork_runner, text).signature
    assert sig.type == "IndexError"
    assert sig.op.tensors == CE_TENSORS
    assert sig.frame == Frame("s.py", 5, "<module>", CE_CALL)


# -- 4. what the script sees --------------------------------------------------------------
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


# -- 5. the user's files are never modified -----------------------------------------------
VANDAL = """\
import os, shutil
with open("data.txt", "r+b") as fh:   # in place, same size: only mtime tells
    fh.write(b"ORIGINAL")
with open("keep.bin", "wb") as fh:     # truncate and rewrite in place
    fh.write(b"gone")
os.remove("old.txt")
open("new.txt", "w").write("made by a candidate")
os.mkdir("outputs")
open("../helper.py", "a").write("VALUE = 0\\n")
shutil.rmtree("../mypkg")
print(open("data.txt").read(), end="")
"""


def test_a_script_that_vandalises_its_cwd_leaves_the_users_directory_byte_identical(
    fork_runner, project, pristine
):
    obs = run(fork_runner, VANDAL)
    assert obs.status == "ok" and obs.stdout == "ORIGINAL data\n"
    assert snapshot(project) == pristine
    # The next run sees the user's files again: the template was repaired.
    obs = run(
        fork_runner,
        """\
        import os, helper
        print(sorted(os.listdir(".")), os.path.isdir("../mypkg"), helper.VALUE)
        print(open("data.txt").read(), end="")
        print(open("keep.bin", "rb").read() == bytes(range(256)) * 4)
        """,
    )
    assert obs.stdout == "['data.txt', 'keep.bin', 'old.txt'] True 41\noriginal data\nTrue\n"


def test_each_run_starts_from_the_users_files_whatever_the_run_before_left(fork_runner, project):
    # Run directories are reset and used again: what a run made (a file, a directory, a
    # cached module, its temporary files), replaced or removed is gone for the next one.
    text = """\
        import os, tempfile
        print(sorted(os.listdir(".")), sorted(os.listdir("..")), os.listdir(tempfile.gettempdir()))
        open("mine.txt", "w").write("x")
        os.mkdir("outputs"); open("outputs/ckpt.pt", "w").write("x")
        os.makedirs("../mypkg/__pycache__", exist_ok=True)
        open(os.path.join(tempfile.gettempdir(), "scratch"), "w").write("x")
        os.remove("data.txt"); open("data.txt", "w").write("replaced")
        os.remove("../helper.py"); os.symlink("/etc/hostname", "../helper.py")
        """
    first, second = (run(fork_runner, text) for _ in range(2))
    assert first.status == second.status == "ok", second.describe()
    assert first.stdout == second.stdout == "['data.txt', 'keep.bin', 'old.txt'] ['helper.py', 'mypkg', 's.py', 'work'] []\n"
    assert run(fork_runner, "print(open('data.txt').read(), end='')").stdout == "original data\n"
    assert not (project / "work" / "mine.txt").exists() and not (project / "work" / "outputs").exists()


def test_a_mode_change_on_a_linked_file_does_not_reach_the_next_run(fork_runner):
    stat_mode = "import os, stat; print(oct(stat.S_IMODE(os.stat('data.txt').st_mode)))"
    try:
        assert run(fork_runner, stat_mode).stdout == "0o644\n"
        run(fork_runner, "import os; os.chmod('data.txt', 0o600)")
        assert run(fork_runner, stat_mode).stdout == "0o644\n"
    finally:
        run(fork_runner, "import os; os.chmod('data.txt', 0o644)")


# -- 6. and 7. timeouts and crashes --------------------------------------------------------
def test_timeout_kills_the_script_and_its_whole_process_group(fork_runner, tmp_path):
    pids = tmp_path / "pids"
    obs = run(
        fork_runner,
        f"""\
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "1000"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(1000)
        """,
        timeout=1.0,
    )
    assert obs.timed_out and obs.status == "timeout"
    assert (obs.exit_code, obs.signal, obs.signature) == (None, signal.SIGKILL, None)
    assert 1.0 <= obs.wall < 2.5
    assert obs.describe().startswith("timed out after")
    assert wait_gone(read_pids(pids, 2)) == []


def test_sigsegv_is_a_crash_with_a_signal_signature(fork_runner):
    obs = run(fork_runner, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert (obs.status, obs.signal, obs.exit_code, obs.timed_out) == ("signal", 11, None, False)
    assert obs.signature.type == "signal.SIGSEGV"
    assert obs.signature.family is Family.CRASH
    assert obs.signature.op is None and obs.failed


def test_os_exit_leaves_no_report_and_no_signature(fork_runner):
    obs = run(fork_runner, "import os\nprint('bye', flush=True)\nos._exit(7)\n")
    assert (obs.status, obs.exit_code, obs.signal, obs.signature) == ("no-report", 7, None, None)
    assert obs.stdout == "bye\n" and not obs.failed


# -- 8. processes that try to outlive their run ---------------------------------------------
NEW_SESSION = """\
import subprocess
p = subprocess.Popen(["sleep", "1000"], start_new_session=True)
open({pids!r}, "w").write(str(p.pid))
{end}
"""
DOUBLE_FORK = """\
import os, time
first = os.fork()
if first == 0:
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        os.execvp("sleep", ["sleep", "1000"])
    open({pids!r}, "w").write(str(daemon))
    os._exit(0)
os.waitpid(first, 0)
{end}
"""


@pytest.mark.parametrize(
    "template, end",
    [(NEW_SESSION, "pass"), (NEW_SESSION, "raise SystemExit(3)"), (DOUBLE_FORK, "pass"), (DOUBLE_FORK, "1 / 0")],
    ids=["new-session-exits", "new-session-fails", "double-fork-exits", "double-fork-fails"],
)
def test_a_daemon_that_escaped_the_process_group_is_killed_after_the_run(plain_runner, tmp_path, template, end):
    pids = tmp_path / "pids"
    obs = run(plain_runner, template.format(pids=str(pids), end=end))
    assert obs.infra_error is None and not obs.timed_out
    daemon = read_pids(pids, 1)
    try:
        assert wait_gone(daemon) == []
    finally:
        kill_quietly(daemon)


def test_a_daemon_with_children_of_its_own_is_killed_after_the_run(plain_runner, tmp_path):
    pids = tmp_path / "pids"
    text = f"""\
        import os, subprocess, time
        first = os.fork()
        if first == 0:
            os.setsid()
            if os.fork() == 0:
                worker = subprocess.Popen(["sleep", "1000"])
                open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{worker.pid}}")
                worker.wait()
                os._exit(0)
            os._exit(0)
        os.waitpid(first, 0)
        while not os.path.exists({str(pids)!r}) or len(open({str(pids)!r}).read().split()) < 2:
            time.sleep(0.01)
        """
    obs = run(plain_runner, text)
    assert obs.status == "ok"
    escaped = read_pids(pids, 2)
    try:
        assert wait_gone(escaped) == []
    finally:
        kill_quietly(escaped)


def test_close_ends_the_supervisor_a_running_candidate_its_children_and_the_temp_dirs(tmp_path):
    before = descendants()
    (tmp_path / "s.py").write_text("pass\n")
    pids = tmp_path / "pids"
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    runner = Runner(spec, capture_ops=False)
    runner.start()
    # The supervisor is the direct child; it also keeps a child forked ahead of need.
    (supervisor,) = {p.pid for p in psutil.Process().children()} - before
    future = runner.submit(
        script(
            f"""\
            import os, subprocess, time
            child = subprocess.Popen(["sleep", "1000"])
            daemon = subprocess.Popen(["sleep", "1000"], start_new_session=True)
            open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}} {{daemon.pid}} {{os.getcwd()}}")
            time.sleep(1000)
            """
        ),
        timeout=60,
    )
    deadline = time.monotonic() + 5
    while len(pids.read_text().split() if pids.exists() else ()) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    *started, cwd = pids.read_text().split()
    started = [int(p) for p in started]
    session = Path(cwd).parent.parent
    assert session.exists() and {supervisor, *started} <= descendants()
    runner.close()
    try:
        assert future.done()
        assert wait_gone([supervisor, *started]) == []
        assert not session.exists()
        deadline = time.monotonic() + 2
        while descendants() - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert descendants() - before == set()
    finally:
        kill_quietly(started)


def test_a_run_cut_short_by_close_is_not_reported_as_a_crash(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        future = runner.submit(script("import time\ntime.sleep(1000)\n"), timeout=60)
        time.sleep(0.3)
    obs = future.result(timeout=10)
    assert not obs.failed
    assert obs.infra_error is not None


# -- 9. fork safety and preloading ---------------------------------------------------------
def test_fork_child_starts_single_threaded_without_cuda_and_with_torch_preloaded(fork_runner, fork_facts):
    report = fork_runner.preload_report
    assert (report.modules, report.dropped, report.isolation) == (("torch",), (), Isolation.FORK)
    obs, seen = fork_facts
    assert seen["threads"] == 1
    assert seen["cuda_initialized"] is False
    assert obs.wall < 2.0  # a fork, not an interpreter that imports torch


def test_preload_drops_a_module_that_starts_a_thread_and_still_forks(preload_runner):
    report = preload_runner.preload_report
    assert len(report.dropped) == 1 and report.dropped[0].startswith("threadmod (")
    assert "thread" in report.dropped[0]
    assert report.modules == ("envmod", "json")
    assert report.isolation is Isolation.FORK and preload_runner.isolation is Isolation.FORK
    obs = run(
        preload_runner,
        "import os, sys\n"
        "print(len(os.listdir('/proc/self/task')), 'threadmod' in sys.modules, 'envmod' in sys.modules)\n",
    )
    assert obs.stdout == "1 False True\n"
    # The module is still there for the script itself to import.
    obs = run(preload_runner, "import threadmod, threading\nprint(threading.active_count())\n")
    assert obs.stdout == "2\n"


@pytest.mark.parametrize("mode", [Isolation.FORK, Isolation.FRESH])
def test_environment_changes_made_by_preloaded_modules_do_not_reach_the_script(preload_runner, mode):
    obs = run(preload_runner, "import os\nprint(os.environ.get('ENVMOD_WAS_HERE'))\n", isolation=mode)
    assert obs.stdout == "None\n"


# -- 10. preload_candidates --------------------------------------------------------------------
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


# -- 11. random state ----------------------------------------------------------------------------
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


# -- 12. parallel candidates ------------------------------------------------------------------------
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


# -- 10. the child forked ahead of need -----------------------------------------------------
def waiting_children(supervisor: int, timeout: float = 5.0) -> list[int]:
    """The supervisor's children once exactly one of them is left (the standby)."""
    deadline = time.monotonic() + timeout
    while True:
        kids = [c.pid for c in psutil.Process(supervisor).children() if not gone(c.pid)]
        if len(kids) == 1 or time.monotonic() > deadline:
            return kids
        time.sleep(0.02)


def test_a_candidate_runs_in_the_child_forked_ahead_and_another_takes_its_place(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    before = {p.pid for p in psutil.Process().children()}
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        (supervisor,) = {p.pid for p in psutil.Process().children()} - before
        text = "import os, random\nprint(os.getpid(), os.getsid(0), os.environ.get('PIN'), random.random())\n"
        seen = []
        for pin in ("0", "1"):
            (standby,) = waiting_children(supervisor)
            obs = runner.run(script(text), timeout=30, env={"PIN": pin})
            pid, sid, got, draw = obs.stdout.split()
            # The waiting child is the one that ran, as its own session, with this
            # run's environment and a random stream of its own.
            assert int(pid) == standby and int(sid) == standby and got == pin
            seen.append(draw)
        assert seen[0] != seen[1]
        (standby,) = waiting_children(supervisor)
        os.kill(standby, signal.SIGKILL)  # a standby that dies waiting is replaced
        assert wait_gone([standby]) == []
        obs = runner.run(script("print('still here')\n"), timeout=30)
        assert obs.status == "ok" and obs.stdout == "still here\n"
        (standby,) = waiting_children(supervisor)
    assert wait_gone([supervisor, standby]) == []  # closing ends the waiting child too


def test_a_run_that_ends_normally_takes_what_it_started_with_it(fork_runner, tmp_path):
    # The verdict goes out as soon as the child says it is done, before the kernel has
    # torn it down; what it left running in its group is killed then, not later.
    pids = tmp_path / "pids"
    obs = run(
        fork_runner,
        f"""\
        import atexit, subprocess, sys
        child = subprocess.Popen(["sleep", "1000"])
        open({str(pids)!r}, "w").write(str(child.pid))
        atexit.register(print, "atexit ran")
        sys.exit(4)
        """,
    )
    assert (obs.status, obs.exit_code, obs.signal) == ("exit", 4, None)
    assert obs.stdout == "atexit ran\n"
    assert wait_gone(read_pids(pids, 1)) == []


# -- 11. what a killed reduction left behind ------------------------------------------------
def test_a_session_whose_owner_died_is_swept_and_no_other(tmp_path, monkeypatch):
    import tempfile

    from shrinkgpu.worker import Sandbox, sweep_stale_sessions

    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "s.py").write_text("pass\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = Sandbox(tmp_path / "root")  # this process owns it: kept
    dead = Sandbox(tmp_path / "root")
    kept = Sandbox(tmp_path / "root", keep=True)
    kept.close()  # kept on purpose (--keep-temp): kept
    # The owner of ``dead`` is a process that has ended (its pid, another start time).
    ended = subprocess.Popen(["true"])
    ended.wait()
    (dead.session / "owner").write_text(f"{ended.pid} 12.00")
    (dead.template / "big.bin").write_bytes(b"x" * 5000)
    unrelated = tmp_path / "shrinkgpu-notes"
    unrelated.mkdir()
    removed = sweep_stale_sessions(tmp_path)
    assert [p for p, _ in removed] == [dead.session] and removed[0][1] >= 5000
    assert not dead.session.exists()
    assert live.session.exists() and kept.session.exists() and unrelated.exists()
    live.close()
    assert not live.session.exists()


def test_a_live_session_is_not_swept_when_the_clock_is_stepped(tmp_path, monkeypatch):
    # psutil's create_time is the boot's wall-clock time plus the process's ticks: a
    # stepped clock (NTP, a resumed virtual machine) moves it, and a live reduction's
    # session was swept by another's start (its files vanished mid-run)
    import sys
    import tempfile

    import psutil

    from shrinkgpu.worker import Sandbox, sweep_stale_sessions

    if not sys.platform.startswith("linux"):
        pytest.skip("the start in clock ticks is Linux's")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "s.py").write_text("pass\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = Sandbox(tmp_path / "root")
    stepped = psutil.Process.create_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: stepped(self) + 3.0)
    assert sweep_stale_sessions(tmp_path) == []
    assert (live.template).is_dir()
    live.close()


def test_the_arguments_of_a_call_that_raised_are_kept_as_it_raised(fork_runner, tmp_path):
    from shrinkgpu.extract import raised_record

    text = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        try:
            torch.zeros(2).view(3)  # caught: user code tries a fast path first
        except RuntimeError:
            pass
        logits = torch.randn(3, 4)
        F.cross_entropy(logits, torch.tensor([0, 4, 1]))
        """)
    obs = run(fork_runner, text, keep_raised=str(tmp_path / "raised"))
    assert [(r["op"], r["call"]) for r in obs.raised_calls] == [
        ("Tensor.view", 1), ("torch.nn.functional.cross_entropy", 1)]
    record = raised_record(obs.raised_calls, obs.signature)
    assert record["op"] == "torch.nn.functional.cross_entropy"
    assert record["meta"]["args[1]"]["values"] == [0, 4, 1]
    assert run(fork_runner, text).raised_calls == ()  # only when asked


def test_the_state_at_the_start_of_an_iteration_is_saved_once(fork_runner, tmp_path):
    import torch

    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
        losses = []
        loader = iter(range(100))
        log_alpha = torch.zeros(1, requires_grad=True)  # its optimizer updates it
        alpha_opt = torch.optim.Adam([log_alpha])
        class Env:
            def __init__(self):
                self.t = torch.zeros(1)
            def advance(self):
                self.t += 1
        env = Env()
        for epoch in range(3):
            for step in range(5):
                env.advance()
                loss = model(torch.ones(1, 2)).sum()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(float(loss))
        torch.zeros(2).view(3)
        """)
    path = tmp_path / "state.pt"
    progress = tmp_path / "progress"
    at = StateAt("s.py", line_of(text, "for step"), ((line_of(text, "for epoch"), 2), (line_of(text, "for step"), 3)),
                 str(path), ("epoch", "step", "loss", "losses", "loader", "env.*"), str(progress))
    obs = run(fork_runner, text, state=at)
    kinds = {e["expr"]: e["kind"] for e in obs.state["entries"]}
    assert kinds == {"model": "load", "opt": "load", "sched": "load", "losses": "value", "epoch": "value",
                     "step": "value", "loss": "value", "log_alpha": "copy", "alpha_opt": "load", "env.t": "value"}
    assert obs.state["left"] == [{"expr": "loader", "why": "a range_iterator (not data a file can carry)"}]
    assert (obs.state["iteration"], obs.state["function"]) == (3, "<module>")
    saved = torch.load(path, weights_only=False)
    assert (saved["epoch"], saved["step"], len(saved["losses"])) == (2, 3, 13)  # 2 epochs of 5, then 3 steps
    assert saved["sched"]["last_epoch"] == 13
    assert set(saved["opt"]["state"]) == {0, 1}  # the momentum buffers
    assert saved["loss"].grad_fn is None  # cut from its graph
    assert saved["env.t"].item() == 13.0
    assert {"rng:random", "rng:torch"} <= set(saved)  # (and numpy's, when the run imported numpy)
    # the script ran on to its own first error
    assert obs.signature.op.name == "Tensor.view"
    # where the loops were, for the progress lines: written at once, then every 5 s
    assert progress.read_text() == "0,0"


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


def test_a_loop_in_a_function_saves_the_module_level_model_it_trains(fork_runner, tmp_path):
    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        unused = torch.nn.Linear(3, 3)

        def forward_twice(x):
            for _ in range(2):  # a loop of another function, not traced
                x = model(x)
            return x

        def train():
            for step in range(4):
                forward_twice(torch.ones(1, 2)).sum().backward()
                opt.step()
            torch.zeros(2).view(3)

        train()
        """)
    path = tmp_path / "state.pt"
    at = StateAt("s.py", line_of(text, "for step"), ((line_of(text, "for step"), 2),), str(path), ("step",))
    obs = run(fork_runner, text, state=at)
    kinds = {e["expr"]: e["kind"] for e in obs.state["entries"]}
    assert kinds == {"step": "value", "model": "load", "opt": "load"}  # not `unused`: train() never names it
    assert obs.state["function"] == "train"


def test_whether_a_floating_point_tensor_at_the_failing_call_was_finite_is_recorded(fork_runner):
    text = textwrap.dedent("""\
        import torch
        probs = torch.full((2, 3), 0.5)
        probs[1, 1] = float("inf")
        torch.multinomial(probs, 1)
        """)
    meta = run(fork_runner, text).signature.op.tensors
    assert [(t.path, t.finite) for t in meta] == [("args[0]", False)]
    negative = run(fork_runner, text.replace('float("inf")', "-1.0")).signature
    assert [t.finite for t in negative.op.tensors] == [True]


def test_the_plain_attributes_of_a_module_the_user_wrote_are_saved_with_its_weights(fork_runner, tmp_path):
    from shrinkgpu.worker import StateAt

    text = textwrap.dedent("""\
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
                self.batch_size = 32  # a callback ramps it
        model = Net()
        for epoch in range(5):
            model.batch_size *= 2
        torch.zeros(2).view(3)
        """)
    at = StateAt("s.py", line_of(text, "for epoch"), ((line_of(text, "for epoch"), 3),), str(tmp_path / "s.pt"), ())
    kinds = {e["expr"]: e["kind"] for e in run(fork_runner, text, state=at).state["entries"]}
    assert kinds == {"model": "load", "model.batch_size": "value"}
    import torch
    assert torch.load(tmp_path / "s.pt", weights_only=False)["model.batch_size"] == 256
