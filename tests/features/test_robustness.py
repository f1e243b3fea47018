"""Nothing lost, nothing overwritten, no surprises: each situation a user met, from the
command line, with its message and exit code (README.md, "Exit codes")."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

EXE = [sys.executable, "-m", "shrinkgpu"]
ROOT = Path(__file__).resolve().parents[2]

GATHER = (
    "import torch\nprint('noise')\na0 = 5\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, 30))
    + "torch.gather(torch.zeros(2, 3), 1, torch.tensor([[a29], [0]]))\n"
)


def shrinkgpu(*args, cwd, timeout=300, env=None, stdin=subprocess.DEVNULL):
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=stdin)


def start(*args, cwd, env=None) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([*EXE, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env=env,
                            # a suite started in the background inherits SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    return proc, lines


def wait_for(lines: list[str], needle: str, seconds: float = 180) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and not any(needle in line for line in lines):
        time.sleep(0.1)
    assert any(needle in line for line in lines), "".join(lines)


def private_tmp(tmp_path: Path) -> tuple[Path, dict]:
    tmp = tmp_path / "user-tmp"
    tmp.mkdir()
    return tmp, {**os.environ, "TMPDIR": str(tmp)}


# -- 1. output paths are checked before any work --------------------------------------------
def test_o_at_a_local_module_is_refused_before_any_work(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 5\n")
    (tmp_path / "s.py").write_text("import torch\nimport helper\ntorch.zeros(2).view(helper.VALUE)\n")
    t0 = time.monotonic()
    done = shrinkgpu("reduce", "s.py", "-k", "invalid", "-o", "helper.py", "--json", cwd=tmp_path)
    assert time.monotonic() - t0 < 20  # no run of the script, no fork server
    assert done.returncode == 2
    assert "refusing to write" in done.stderr and "helper.py" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 2
    assert (tmp_path / "helper.py").read_text() == "VALUE = 5\n"


@pytest.mark.parametrize(("output", "message"), [(".", "is a directory"), ("s.py/x.py", "is a file, not a directory")])
def test_o_at_a_directory_or_below_a_file_is_refused_at_once(tmp_path, output, message):
    (tmp_path / "s.py").write_text("import torch\ntorch.zeros(2).view(3)\n")
    done = shrinkgpu("reduce", "s.py", "-k", "invalid", "-o", output, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr


def test_o_in_a_new_directory_creates_it(tmp_path):
    (tmp_path / "s.py").write_text("import torch\nx = 1\ntorch.zeros(2).view(3)\n")
    done = shrinkgpu("reduce", "s.py", "-k", "invalid", "-o", "out/deeper/r.py", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "deeper" / "r.py").is_file() and (tmp_path / "out" / "deeper" / "r.md").is_file()


# -- 2. interrupts and signals leave the best result, marked partial, and nothing else ----------
def test_sigterm_in_the_middle_leaves_a_partial_result_no_process_and_no_temp_dir(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(GATHER)
    before = script.read_bytes()
    tmp, env = private_tmp(tmp_path)
    proc, lines = start("reduce", "slow.py", "-k", "out of bounds", "--isolation", "fresh", "-j", "1",
                        "--confirm", "0", "--json", cwd=tmp_path, env=env)
    wait_for(lines, "reducing")
    tree = psutil.Process(proc.pid)
    time.sleep(8)  # a few fresh candidates into the search
    family = [tree, *tree.children(recursive=True)]
    proc.send_signal(signal.SIGTERM)
    out = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 143, "".join(lines)
    data = json.loads(out)
    assert data["stopped_early"] and data["exit_code"] == 143
    result = tmp_path / "slow.min.py"
    assert result.is_file() and result.read_text().startswith("# shrinkgpu: partial result")
    assert data["tokens_after"] < data["tokens_before"]
    assert script.read_bytes() == before
    gone, alive = psutil.wait_procs(family, timeout=10)
    assert alive == []
    assert list(tmp.iterdir()) == []


def test_ctrl_c_while_the_result_is_verified_writes_it_unverified_and_exits_130(tmp_path):
    (tmp_path / "s.py").write_text("import time, torch\ntime.sleep(2)\nx = 1\ntorch.zeros(2).view(3)\n")
    tmp, env = private_tmp(tmp_path)
    proc, lines = start("reduce", "s.py", "-k", "invalid", "--max-tests", "2", "--verify", "5", "--confirm", "0",
                        cwd=tmp_path, env=env)
    wait_for(lines, "verifying the result")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(lines)
    assert "partial: not verified" in out
    assert (tmp_path / "s.min.py").read_text().startswith("# shrinkgpu: partial result")
    assert "interrupted while the result was re-checked" in (tmp_path / "s.min.md").read_text()
    assert list(tmp.iterdir()) == []


def test_resume_continues_from_the_partial_result(tmp_path):
    (tmp_path / "slow.py").write_text(GATHER)
    (tmp_path / "slow.min.py").write_text(
        "# shrinkgpu: partial result (the search was still going): not verified\n"
        "import torch\na29 = 5\ntorch.gather(torch.zeros(2, 3), 1, torch.tensor([[a29], [0]]))\n"
    )
    done = shrinkgpu("reduce", "slow.py", "-k", "out of bounds", "--resume", "--json", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["start"]["from"] == "partial result"
    assert data["candidates_tested"] < 40  # a few-line start, not the 33-line original
    assert not (tmp_path / "slow.min.py").read_text().startswith("# shrinkgpu: partial")


# -- 3. the user's working directory -------------------------------------------------------------
def test_cd_repo_and_reduce_scripts_train_resolves_paths_as_python_does(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "data" / "label.txt").write_text("3\n")
    (tmp_path / "scripts" / "train.py").write_text(
        "import torch\nimport torch.nn.functional as F\nlabel = int(open('data/label.txt').read())\n"
        "F.cross_entropy(torch.randn(2, 3), torch.tensor([0, label]))\n"
    )
    done = shrinkgpu("reduce", "scripts/train.py", "-k", "out of bounds", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "scripts" / "train.min.py").is_file()


def test_a_missing_file_says_how_to_fix_it(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "s.py").write_text("open('../data/x.txt')\n")
    done = shrinkgpu("reduce", "s.py", "-k", "out of bounds", cwd=tmp_path / "elsewhere")
    assert done.returncode == 3
    assert "--root" in done.stderr and "copy of" in done.stderr


# -- 4. --max-time bounds the whole run -----------------------------------------------------------
def test_max_time_bounds_the_first_run_and_names_timeout(tmp_path):
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(1000)\n")
    t0 = time.monotonic()
    done = shrinkgpu("reduce", "hang.py", "-k", "x", "--max-time", "4", "--json", cwd=tmp_path, timeout=120)
    assert time.monotonic() - t0 < 60
    assert done.returncode == 3
    assert "did not finish" in done.stderr and "--timeout" in done.stderr
    assert json.loads(done.stdout)["exit_code"] == 3


SLOW_ORIGINAL = """\
import time
import torch
for step in range(100):          # ten seconds the failure does not need
    time.sleep(0.1)
w = torch.zeros(3, 4)
x = torch.ones(2, 5)
y = x @ w
"""


def test_max_time_keeps_for_the_final_checks_what_the_result_takes_not_the_original(tmp_path):
    # Four runs of this 10 s original (two checks, the extraction) would leave the search
    # nothing of 60 s once the first run and its calibration ran; the loop goes with the
    # first candidate, and the search must then go on to the end.
    (tmp_path / "slow.py").write_text(SLOW_ORIGINAL)
    done = shrinkgpu("reduce", "slow.py", "-k", "shapes cannot be multiplied", "--max-time", "60", "--json",
                     "--confirm", "0", cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["stop_reason"] is None, summary
    assert "for step" not in (tmp_path / "slow.min.py").read_text()


# -- 5. sources as Python reads them; notebooks; -m -------------------------------------------
def test_a_latin1_source_is_read_and_written_in_its_encoding(tmp_path):
    src = '# -*- coding: latin-1 -*-\nimport torch\nname = "caf\xe9"\nprint(name)\ntorch.zeros(2).view(len(name) + 1)\n'
    (tmp_path / "s.py").write_bytes(src.encode("latin-1"))
    done = shrinkgpu("reduce", "s.py", "-k", r"shape '\[5\]'", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = (tmp_path / "s.min.py").read_bytes()
    assert b"caf\xe9" in out and b"coding: latin-1" in out
    plain = subprocess.run([sys.executable, "s.min.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "shape '[5]' is invalid" in plain.stderr


def test_a_notebook_reduces_its_code_cells_and_drops_magics_with_a_note(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
         "source": ["%matplotlib inline\n", "import torch\n", "!nvidia-smi\n", "x = torch.zeros(2, 3)\n", "x"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 2,
         "source": ["%%time\n", "y = x.t()\n", "y.view(6)"]},
    ]
    (tmp_path / "demo.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                     "cells": cells}))
    done = shrinkgpu("reduce", "demo.ipynb", "-k", "view size", "--json", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["output"] == str(tmp_path / "demo.min.py")
    notes = " ".join(data["notes"])
    assert "magic" in notes and "shell escape" in notes
    plain = subprocess.run([sys.executable, "demo.min.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "view size is not compatible" in plain.stderr


def test_dash_m_runs_a_package_module_like_python_dash_m(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text("K = 7\n")
    (tmp_path / "pkg" / "train.py").write_text(
        "from .util import K\nimport torch\ntorch.gather(torch.zeros(2, 3), 1, torch.tensor([[K], [0]]))\n"
    )
    ran = shrinkgpu("run", "-m", "pkg.train", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "index 7 is out of bounds" in ran.stdout
    done = shrinkgpu("reduce", "-m", "pkg.train", "-k", "out of bounds", "--json", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = Path(json.loads(done.stdout)["output"])
    report = out.with_name(out.name + ".md").read_text() if out.is_dir() else out.with_suffix(".md").read_text()
    assert "python -m pkg.train" in report or "python train.min.py" in report


# -- 6. stdin, options, exit codes, JSON ----------------------------------------------------------
def test_a_stdin_that_stays_open_does_not_block(tmp_path):
    (tmp_path / "s.py").write_text("import sys\ndata = sys.stdin.read()\nraise ValueError(f'got {len(data)} bytes')\n")
    proc = subprocess.Popen([*EXE, "run", "s.py"], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # the pipe is never closed: shrinkgpu must go on by itself
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.2)
    assert proc.poll() is not None, "blocked on an open stdin"
    out = proc.stdout.read()
    proc.stdin.close()
    assert "ValueError: got 0 bytes" in out
    assert "stdin stayed open" in out


def test_the_readme_example_command_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"^shrinkgpu reduce train\.py .*$", readme, re.M)
    assert example is not None, "README shows an example reduce command line"
    (tmp_path / "train.py").write_text(
        "import argparse, torch, torch.nn.functional as F\n"
        "p = argparse.ArgumentParser()\np.add_argument('--epochs', type=int)\nargs = p.parse_args()\n"
        "F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4 + 0 * args.epochs]))\n"
    )
    import shlex

    words = shlex.split(example.group(0))
    assert words[0] == "shrinkgpu" and "--" in words
    cut = words.index("--")
    # exactly the README's words; only progress and the extra runs are switched off, before `--`
    done = shrinkgpu(*words[1:cut], "-q", "--confirm", "0", *words[cut:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train.min.py").is_file()


@pytest.mark.parametrize("command", ["run", "reduce"])
def test_run_and_reduce_agree_on_a_missing_file_and_always_print_json(tmp_path, command):
    args = [command, "missing.py", "--json"] + (["-k", "x"] if command == "reduce" else [])
    done = shrinkgpu(*args, cwd=tmp_path)
    assert done.returncode == 2
    data = json.loads(done.stdout)
    assert data["exit_code"] == 2 and "no such file" in data["error"]


def test_json_for_an_error_that_does_not_match_and_for_a_usage_error(tmp_path):
    (tmp_path / "s.py").write_text("raise KeyError('lr')\n")
    done = shrinkgpu("reduce", "s.py", "-k", "out of bounds", "--json", cwd=tmp_path)
    assert done.returncode == 3 and json.loads(done.stdout)["signature"]["type"] == "KeyError"
    done = shrinkgpu("reduce", "s.py", "--json", cwd=tmp_path)  # neither -k nor --family
    assert done.returncode == 2 and "--keep-error" in json.loads(done.stdout)["error"]


def test_options_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.shrinkgpu]\nkeep-error = "invalid"\nconfirm = 0\n')
    (tmp_path / "s.py").write_text("import torch\nx = 1\ntorch.zeros(2).view(3)\n")
    done = shrinkgpu("reduce", "s.py", "-q", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["signature"]["op"]["name"] == "Tensor.view"


def test_the_reproduce_line_is_quoted_for_names_with_spaces(tmp_path):
    (tmp_path / "my script.py").write_text("import torch\nx = 1\ntorch.zeros(2).view(3)\n")
    done = shrinkgpu("reduce", "my script.py", "-k", "invalid", "-q", "--confirm", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "python 'my script.min.py'" in (tmp_path / "my script.min.md").read_text()


def test_version():
    done = shrinkgpu("--version", cwd=ROOT)
    assert done.returncode == 0 and "shrinkgpu, version" in done.stdout


def test_a_reduction_killed_with_sigkill_is_cleaned_up_by_the_next_one(tmp_path):
    (tmp_path / "s.py").write_text(GATHER)
    (tmp_path / "data.bin").write_bytes(os.urandom(1 << 20))  # what the template copies
    tmp, env = private_tmp(tmp_path)
    proc, lines = start("reduce", "s.py", "-k", "out of bounds", "-j", "1", "--confirm", "0",
                        "-o", "first.py", cwd=tmp_path, env=env)
    wait_for(lines, "reducing")
    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    proc.kill()  # no handler runs: the session stays behind
    proc.wait(timeout=30)
    psutil.wait_procs(family, timeout=10)  # the supervisor follows when its pipe closes
    (left,) = [p for p in tmp.iterdir() if p.name.startswith("shrinkgpu-")]
    done = shrinkgpu("reduce", "s.py", "-k", "out of bounds", "-j", "1", "--confirm", "0", "--max-time", "30",
                     "-o", "second.py", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert re.search(r"removed 1 temporary directory \(1\.\d MB\) left by earlier runs that were killed: "
                     + re.escape(str(left)), done.stderr), done.stderr
    assert not left.exists() and list(tmp.iterdir()) == []
