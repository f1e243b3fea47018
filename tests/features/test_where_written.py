"""What the user sees is what shrinkgpu keeps, and what the user asked for is where the
result is (issue 25), end to end with real workers and real torch: the error Python
shows under ``raise ... from None``, a result of several files at the path asked for,
and the printed command run as printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

QUICK = ["--confirm", "0", "--verify", "1", "--max-tests", "60", "-q", "--json"]


def shrinkgpu(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shrinkgpu", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def with_this_python(command: str) -> str:
    """``command`` with this interpreter for ``python`` (the one with torch, wherever PATH points)."""
    return re.sub(r"(^|&& )python ", lambda m: m.group(1) + shlex.quote(sys.executable) + " ", command)


def printed_command(report: Path) -> str:
    """The command under "How it was reduced", as the report prints it."""
    text = report.read_text()
    return re.search(r"### How it was reduced \(shrinkgpu\)\n\n```sh\n(.*)\n```", text).group(1)


@pytest.fixture
def weights_only(tmp_path) -> Path:
    (tmp_path / "load.py").write_text(textwrap.dedent("""\
        import numpy as np
        import torch

        stats = {"mean": np.zeros(3), "std": np.ones(3)}
        torch.save(stats, "stats.pt")
        print("saved")
        restored = torch.load("stats.pt")
        print(restored["mean"])
        """))
    return tmp_path / "load.py"


@pytest.mark.parametrize("pattern", ["Weights only load failed", "Unsupported global"])
def test_keep_error_takes_the_message_python_shows_or_the_one_from_none_hid(weights_only, pattern):
    done = shrinkgpu("reduce", "--keep-error", pattern, "--no-extract", *QUICK, "load.py", cwd=weights_only.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["signature"]["type"] == "_pickle.UnpicklingError"
    assert summary["signature"]["message"].startswith("Weights only load failed.")
    assert summary["signature"]["suppressed"].startswith("_pickle.UnpicklingError: Unsupported global")
    result = Path(summary["output"]).read_text()
    assert "torch.load(" in result and "np." in result
    report = Path(summary["report"]).read_text()
    assert "which `raise ... from None` keeps out of the traceback" in report


def multi_file(tmp_path: Path) -> Path:
    # The module is imported by name at run time: no pass can paste it in.
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import importlib
        import torch

        heads = importlib.import_module("heads")
        print("building")
        logits = torch.randn(4, 3)
        heads.score(logits, torch.tensor([0, 1, 2, 3]))
        """))
    (tmp_path / "heads.py").write_text(textwrap.dedent("""\
        import torch.nn.functional as F


        def score(logits, target):
            return F.cross_entropy(logits, target)
        """))
    return tmp_path / "train.py"


@pytest.mark.parametrize("stop", [[], ["--max-time", "40"]], ids=["to-the-end", "max-time"])
def test_a_result_of_several_files_is_only_a_directory_beside_the_path_asked_for(tmp_path, stop):
    script = multi_file(tmp_path)
    out = tmp_path / "out" / "x.min.py"
    done = shrinkgpu("reduce", "--keep-error", "out of bounds", "-o", str(out), *QUICK, *stop, "train.py",
                     cwd=script.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    directory = tmp_path / "out" / "x.min"
    assert summary["output"] == str(directory) and summary["command"] == "cd x.min && python train.py"
    assert not out.exists()
    assert sorted(p.name for p in directory.iterdir()) == ["heads.py", "train.py"]
    ran = subprocess.run(with_this_python(summary["command"]), shell=True, cwd=out.parent, capture_output=True,
                         text=True, timeout=120)
    assert "IndexError: Target 3 is out of bounds." in ran.stderr, ran.stderr


def test_the_command_the_report_prints_runs_where_the_result_is(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "labels.txt").write_text("0 1 2 4\n")
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import torch
        import torch.nn.functional as F

        with open("data/labels.txt") as f:
            labels = torch.tensor([int(x) for x in f.read().split()])
        print("labels", labels.tolist())
        logits = torch.randn(len(labels), 4)
        F.cross_entropy(logits, labels)
        """))
    out = tmp_path / "elsewhere" / "repro.min.py"
    done = shrinkgpu("reduce", "--keep-error", "out of bounds", "-o", str(out), "--no-extract", *QUICK, "train.py",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert "open(" in out.read_text()  # the result still reads the labels
    assert summary["copied_beside"] == ["data/labels.txt"]
    assert (out.parent / "data" / "labels.txt").read_text() == "0 1 2 4\n"
    assert summary["verified_where_written"].startswith("reproduces there too")
    command = printed_command(out.with_name("repro.min.md"))
    assert command == "python repro.min.py"
    ran = subprocess.run(with_this_python(command), shell=True, cwd=out.parent, capture_output=True, text=True,
                         timeout=120)
    assert "IndexError: Target 4 is out of bounds." in ran.stderr, ran.stderr
