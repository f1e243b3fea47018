"""The command line with real processes: exit codes, refusals, JSON, the exact result
of a small reduction."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import interruptible

EXE = [sys.executable, "-m", "shrinkgpu"]

FAILING = textwrap.dedent(
    """\
    import argparse
    import torch
    import torch.nn.functional as F


    def unused_helper(x):
        return x * 2


    parser = argparse.ArgumentParser()
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    logits = torch.randn(3, 4)
    target = torch.tensor([0, 2, 4])
    if args.verbose:
        print("targets", target.tolist())
    print("starting")
    loss = F.cross_entropy(logits, target)
    print("never here", loss)
    """
)

REDUCED = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F
    F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))
    """
)


def shrinkgpu(*args, cwd, stdin=subprocess.DEVNULL, timeout=300):
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=stdin)


@pytest.fixture()
def failing(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(FAILING)
    return script


def test_run_prints_the_signature_and_exits_zero_for_a_failing_script(failing):
    result = shrinkgpu("run", failing.name, cwd=failing.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "IndexError: Target 4 is out of bounds."
    assert "operator: torch.nn.functional.cross_entropy" in result.stdout
    assert "args[0]: float32[3, 4] stride (4, 1) on cpu" in result.stdout
    assert "args[1]: int64[3] stride (1) on cpu" in result.stdout
    assert "at repro.py:18" in result.stdout


def test_run_exits_three_when_the_script_does_not_fail(tmp_path):
    (tmp_path / "ok.py").write_text("print('fine')\n")
    result = shrinkgpu("run", "ok.py", "--json", cwd=tmp_path)
    assert result.returncode == 3
    data = json.loads(result.stdout)
    assert data["failed"] is False and data["signature"] is None


def test_run_passes_arguments_after_double_dash(failing):
    result = shrinkgpu("run", failing.name, "--json", "--", "--verbose", cwd=failing.parent)
    assert result.returncode == 0
    assert json.loads(result.stdout)["signature"]["type"] == "IndexError"


def test_reduce_writes_the_exact_minimal_script_and_leaves_the_input_alone(failing):
    before = failing.read_bytes()
    result = shrinkgpu("reduce", failing.name, "--keep-error", "out of bounds", "--json", "-q", "-j", "2",
                       cwd=failing.parent)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    out = failing.with_name("repro.min.py")
    assert data["output"] == str(out)
    assert out.read_text() == REDUCED
    assert failing.read_bytes() == before
    for key in ("tokens_before", "tokens_after", "candidates_tested", "seconds", "signature"):
        assert key in data
    # where the candidates ran: this machine, two at once
    assert (data["executor"], data["nodes"], data["workers"], data["jobs"]) == ("local", [socket.gethostname()], 2, 2)
    assert data["candidates_per_second"] > 0
    assert 0 <= data["speculation"]["unused_runs"] <= data["candidates_tested"]
    assert data["tokens_after"] < data["tokens_before"]
    assert data["signature"]["op"]["name"] == "torch.nn.functional.cross_entropy"
    assert data["verified"] == {"reproduced": 2, "runs": 2}
    report = failing.with_name("repro.min.md").read_text()
    assert "IndexError: Target 4 is out of bounds." in report and "python repro.min.py" in report


def test_reduce_refuses_to_overwrite_its_input(failing):
    before = failing.read_bytes()
    result = shrinkgpu("reduce", failing.name, "-k", "bounds", "-o", failing.name, cwd=failing.parent)
    assert result.returncode == 2
    assert "refusing to write the output over the input" in result.stderr
    assert failing.read_bytes() == before


def test_reduce_exits_three_with_the_observed_error_when_it_does_not_match(failing):
    result = shrinkgpu("reduce", failing.name, "--keep-error", "device-side assert", cwd=failing.parent)
    assert result.returncode == 3
    assert "does not match --keep-error 'device-side assert'" in result.stderr
    assert "IndexError: Target 4 is out of bounds." in result.stderr
    assert not failing.with_name("repro.min.py").exists()


def test_reduce_exits_three_when_the_script_does_not_fail(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\nprint(torch.ones(2).sum())\n")
    result = shrinkgpu("reduce", "ok.py", "-k", "anything", cwd=tmp_path)
    assert result.returncode == 3
    assert "the script did not fail" in result.stderr
    assert not (tmp_path / "ok.min.py").exists()


def test_reduce_rejects_a_bad_regex_and_a_missing_script(tmp_path, failing):
    bad = shrinkgpu("reduce", failing.name, "-k", "(unclosed", cwd=failing.parent)
    assert bad.returncode == 2 and "not a valid regular expression" in bad.stderr
    missing = shrinkgpu("reduce", "nope.py", "-k", "x", cwd=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_the_error_text_in_our_own_argv_never_reaches_the_script(tmp_path):
    # The brief's slip: a reducer whose worker saw its own command line let argparse
    # echo the --keep-error text into a usage error that "matched".  Here the script
    # rejects any argument, so if our argv leaked the run would end in SystemExit(2).
    script = tmp_path / "strict.py"
    script.write_text(
        "import argparse, torch\n"
        "argparse.ArgumentParser().parse_args()\n"
        "torch.gather(torch.zeros(2, 3), 1, torch.tensor([[5], [0]]))\n"
    )
    result = shrinkgpu("reduce", script.name, "-k", "index 5 is out of bounds", "--json", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["signature"]["type"] == "RuntimeError"
    assert data["signature"]["op"]["name"] == "torch.gather"


def test_python_dash_m_and_the_console_script_agree(tmp_path):
    exe = Path(sys.executable).with_name("shrinkgpu")
    assert exe.exists()
    a = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    b = subprocess.run([*EXE, "--version"], capture_output=True, text=True)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and "0.1.0" in a.stdout


def test_a_program_that_stays_in_several_files_is_written_as_a_directory(tmp_path):
    # ``import helpers.tools`` (a dotted import of a package module) is not inlined, so
    # the result keeps two files; they go to repro.min/ and run from there.
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "tools.py").write_text(
        "import torch\n\n\ndef unused():\n    return 1\n\n\ndef pick(x):\n"
        "    return torch.gather(x, 1, torch.tensor([[5], [0]]))\n"
    )
    (tmp_path / "repro.py").write_text(
        "import torch\nimport helpers.tools\n\nprint('start')\nx = torch.zeros(2, 3)\n"
        "y = helpers.tools.pick(x)\nprint(y)\n"
    )
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.py")}
    result = shrinkgpu("reduce", "repro.py", "-k", "out of bounds", "--json", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    out = tmp_path / "repro.min"
    assert data["output"] == str(out) and out.is_dir()
    # the empty __init__.py is not needed: helpers is a namespace package without it
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.py")) == ["helpers/tools.py", "repro.py"]
    assert "def unused" not in (out / "helpers" / "tools.py").read_text()
    assert {p: p.read_bytes() for p in before} == before
    plain = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True)
    assert "index 5 is out of bounds" in plain.stderr


def test_ctrl_c_writes_the_best_result_so_far_and_exits_130(tmp_path):
    import signal
    import time

    script = tmp_path / "slow.py"
    script.write_text(
        "import torch\nprint('noise')\na0 = 5\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, 40))
        + "torch.gather(torch.zeros(2, 3), 1, torch.tensor([[a39], [0]]))\n"
    )
    # Fresh interpreters cost a second or more per candidate: the search is still going
    # when SIGINT arrives.
    proc, lines = interruptible([*EXE, "reduce", script.name, "-k", "out of bounds", "--json", "-j", "1",
                                 "--isolation", "fresh"], tmp_path)
    # Interrupted once the progress lines show a smaller program than the original (not
    # after a fixed time: on a loaded machine the first candidates take longer).
    def smaller_seen() -> bool:
        start = [int(m.group(1)) for line in lines if (m := re.search(r"reducing (\d+) tokens", line))]
        now = [int(m.group(1)) for line in lines if (m := re.search(r"\| (\d+) tokens", line))]
        return bool(start and now and min(now) < start[0])

    deadline = time.time() + 300
    while time.time() < deadline and not smaller_seen():
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(lines)
    data = json.loads(stdout)
    assert data["stopped_early"] is True and data["stop_reason"] == "interrupted"
    assert (tmp_path / "slow.min.py").exists()
    assert data["tokens_after"] < data["tokens_before"]
    assert data["verified"] == {"reproduced": 0, "runs": 0}  # not re-checked in fresh interpreters


def test_reduce_cuts_a_loop_to_the_iteration_that_failed_in_the_original(tmp_path):
    # Only the fifth row is bad: the first iteration does not reproduce, the counted one does.
    script = tmp_path / "rows.py"
    script.write_text(textwrap.dedent(
        """\
        import torch

        data = [torch.arange(3) for _ in range(6)]
        data[4] = torch.arange(3) + 5
        table = torch.zeros(4)
        for epoch in range(2):
            for x in data:
                y = table[x]
        """
    ))
    result = shrinkgpu("reduce", script.name, "--keep-error", "out of bounds", "-q", "-j", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = script.with_name("rows.min.py").read_text()
    assert "for " not in out.replace("for _ in", "")  # no loop left but the data's own
    # the bad row, wherever shrinking the data moved it (the count is redone on the way)
    # (``x = data[k]`` and ``table[x]``, or with ``x`` inlined, ``table[data[k]]``)
    index = int(re.search(r"(?:^x = |[\w)]\[)data\[(\d+)\]\]?$", out, re.M).group(1))
    assert f"data[{index}] = torch.arange(3) +" in out
    check = subprocess.run([sys.executable, "rows.min.py"], cwd=tmp_path, capture_output=True, text=True)
    assert re.search(r"IndexError: index \d+ is out of bounds for dimension 0 with size \d+", check.stderr)


def test_sync_launches_sets_the_backend_variable_for_every_run_and_says_so(tmp_path):
    # A CPU build is not ROCm: the NVIDIA variable. The script fails only when it sees it,
    # so the original, every candidate and the fresh re-checks all ran with it.
    script = tmp_path / "env.py"
    script.write_text(textwrap.dedent(
        """\
        import os
        import torch
        print("noise")
        if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
            torch.zeros(2)[3]
        """
    ))
    plain = shrinkgpu("run", script.name, cwd=tmp_path)
    assert plain.returncode == 3  # without the flag the script does not fail
    ran = shrinkgpu("run", script.name, "--sync-launches", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["launch_env"] == {"CUDA_LAUNCH_BLOCKING": "1"}
    result = shrinkgpu("reduce", script.name, "-k", "out of bounds", "--sync-launches", "--json", "-q", "-j", "2",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["launch_env"] == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert data["verified"] == {"reproduced": 2, "runs": 2}
    assert "CUDA_LAUNCH_BLOCKING=1 python env.min.py" in script.with_name("env.min.md").read_text()
    assert "print" not in script.with_name("env.min.py").read_text()


def test_a_bug_in_a_package_module_reduces_to_one_file_without_the_empty_init(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "heads.py").write_text(
        "import torch\n\n\ndef pick(scores, idx):\n    return torch.gather(scores, 1, idx)\n\n\n"
        "def unused():\n    return 1\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom models.heads import pick\nimport models.heads as H\n\nprint('start')\n"
        "scores = torch.zeros(2, 3)\nidx = torch.tensor([[5], [0]])\nH.unused()\nout = pick(scores, idx)\n"
    )
    result = shrinkgpu("reduce", script.name, "-k", "out of bounds", "-q", "-j", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "train.min").exists()
    out = (tmp_path / "train.min.py").read_text()
    assert "models" not in out and "torch.gather(" in out
    assert (tmp_path / "models" / "__init__.py").read_text() == ""  # the user's files stay


# -- the fork server is never given up silently ------------------------------------------------
THREADED_SITE = (
    "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(1000,), daemon=True, name='site-watcher').start()\n"
)


def test_a_fork_server_that_cannot_start_is_said_in_the_first_progress_lines(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(THREADED_SITE)
    (tmp_path / "repro.py").write_text("import torch\ntorch.zeros(2).view(3)\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [*EXE, "reduce", "repro.py", "-k", "shape", "--max-tests", "1", "--verify", "0", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stderr
    progress = result.stderr.splitlines()
    # Among the first lines, before any candidate (after the original's run and the
    # failing call written alone): what happened, why, what to do.
    head = "\n".join(progress[:next(i for i, line in enumerate(progress) if "reducing" in line)])
    assert len(head.splitlines()) <= 8, head
    assert "forking is not safe here (1 other thread(s) keep running across fork ('site-watcher'))" in head
    assert "every candidate runs in a fresh interpreter" in head and "--isolation" in head
    data = json.loads(result.stdout)
    assert data["isolation"] == "fresh"
    assert data["isolation_because"].startswith("forking is not safe here")
    report = (tmp_path / "repro.min.md").read_text()
    assert "isolation: fresh" in report and "forking is not safe here" in report


def test_isolation_fork_given_explicitly_and_impossible_is_an_error(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(THREADED_SITE)
    (tmp_path / "repro.py").write_text("import torch\ntorch.zeros(2).view(3)\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [*EXE, "reduce", "repro.py", "-k", "shape", "--isolation", "fork"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 1
    assert ("--isolation fork is not possible here: 1 other thread(s) keep running across fork ('site-watcher')"
            in result.stderr)
    assert not (tmp_path / "repro.min.py").exists()
