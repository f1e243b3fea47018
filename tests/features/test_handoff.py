"""The maintainer's handoff: a report that pastes into a bug template with nothing
private in it, and, after a fix, `verify` and the emitted regression test."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_fixture
from shrinkgpu.reducer import ReduceConfig, reduce

EXE = [sys.executable, "-m", "shrinkgpu"]

PRIVATE = """\
import argparse
import os

import torch

p = argparse.ArgumentParser()
p.add_argument("--token", default=os.environ.get("API_KEY", ""))
p.add_argument("--data", default=os.path.expanduser("~/datasets"))
args = p.parse_args()
print("loading", args.data)
weights = torch.load(os.path.join(args.data, args.token + ".pt"))
print(weights)
"""


@pytest.fixture()
def private_run(tmp_path):
    home = tmp_path / "home" / "alicebob"
    (home / "datasets").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / "load.py").write_text(PRIVATE)
    env = {**os.environ, "HOME": str(home), "USER": "alicebob", "LOGNAME": "alicebob",
           "API_KEY": "sk-live-7f3a9c21e5"}
    done = subprocess.run([*EXE, "reduce", "load.py", "-k", "No such file", "--json", "-q", "--confirm", "0"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return project, json.loads(done.stdout)


def test_the_report_has_every_section_of_the_bug_template_and_nothing_private(private_run):
    project, data = private_run
    report = (project / "load.min.md").read_text()
    for section in ("### 🐛 Describe the bug", "The error:", "### Versions", "### How it was reduced (shrinkgpu)",
                    "First check:", "| operator |"):
        assert section in report, section
    # torch.utils.collect_env, run once in a fresh process
    assert "PyTorch version: " in report and "Python version: " in report
    assert "python load.min.py" in report
    for private in ("alicebob", "sk-live-7f3a9c21e5", str(project.parent / "home")):
        assert private not in report, private
    assert "~/datasets/$API_KEY.pt" in report  # the path as the user would recognise it
    assert "redacted from this report:" in report
    assert "the home directory" in report and "environment variable values" in report


def test_a_value_read_from_the_environment_stays_a_read_of_the_environment(private_run):
    project, _ = private_run
    result = (project / "load.min.py").read_text()
    assert "sk-live-7f3a9c21e5" not in result and "alicebob" not in result
    assert 'os.environ["API_KEY"]' in result.replace("'", '"')
    assert "os.path.expanduser(\"~/datasets\")" in result.replace("'", '"')


# -- verify and the regression test on a patched fixture ------------------------------------------
MAPPING = '{"cat": 1, "dog": 2, "fox": 3, "owl": 4}'
FIXED_MAPPING = '{"cat": 0, "dog": 1, "fox": 2, "owl": 3}'


def patch(path: Path) -> None:
    """The field guide's fix, as a user would make it: the label mapping fixed at its
    source, and a check that rejects out-of-range targets right before the loss."""
    import ast

    text = path.read_text().replace(MAPPING, FIXED_MAPPING)
    tree = ast.parse(text)
    lines = text.splitlines()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and len(node.args) == 2):
            continue
        func = node.func
        is_loss = (isinstance(func, ast.Name) and func.id == "criterion") or (
            isinstance(func, ast.Call) and getattr(func.func, "attr", "") == "CrossEntropyLoss"
        )
        if not is_loss:
            continue
        stmt = next(s for s in ast.walk(tree) if isinstance(s, ast.stmt) and s.lineno == node.lineno
                    and not isinstance(s, (ast.For, ast.FunctionDef, ast.If, ast.With)))
        indent = lines[stmt.lineno - 1][: len(lines[stmt.lineno - 1]) - len(lines[stmt.lineno - 1].lstrip())]
        target = node.args[1]
        before = []
        if not isinstance(target, ast.Name):
            segment = ast.get_source_segment(text, target)
            lines[stmt.lineno - 1] = lines[stmt.lineno - 1].replace(segment, "_target")
            before.append(f"{indent}_target = {segment}")
            name = "_target"
        else:
            name = target.id
        before.append(f"{indent}validate_class_targets({name}, 4)")
        lines[stmt.lineno - 1: stmt.lineno - 1] = before
        break
    else:
        raise AssertionError(f"no loss call in {path}:\n{text}")
    path.write_text("from shrinkgpu.checks import validate_class_targets\n" + "\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def reduced_fixture(tmp_path_factory):
    fx = load_fixture("class_index")
    work = tmp_path_factory.mktemp("handoff") / "class_index"
    shutil.copytree(fx.dir, work, ignore=shutil.ignore_patterns("*.min.*"))
    # To the end (a partly reduced case goes on after its failure with code that never
    # ran; once fixed it would run and fail there).
    result = reduce(ReduceConfig(script=work / fx.script, cwd=work, keep_error=fx.keep_error, jobs=2,
                                 confirm=0, verify_runs=1))
    assert MAPPING in result.output.read_text()  # the mapping is where the bad values come from
    return work, result


def verify_cli(*args, cwd):
    return subprocess.run([*EXE, "verify", *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def pytest_file(test: Path):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          cwd=test.parent, capture_output=True, text=True, timeout=600)


def test_verify_and_the_regression_test_fail_before_the_fix_and_pass_after(reduced_fixture, tmp_path):
    work, result = reduced_fixture
    before = tmp_path / "before"
    shutil.copytree(work, before)
    after = tmp_path / "after"
    shutil.copytree(work, after)
    patch(after / "train.py")
    patch(after / "train.min.py")

    # Unpatched: verify names what still fails; the regression test fails.
    test_before = before / "tests" / "test_class_index_regression.py"
    done = verify_cli("train.min.py", "--emit-test", str(test_before), "--json", cwd=before)
    assert done.returncode == 4, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["the minimal case"]["outcome"] == "still failing"
    assert checks["the original script (train.py)"]["outcome"] == "still failing"
    assert checks["neighbour target with one entry 0"]["outcome"] == "still failing"  # the other entries
    ran = pytest_file(test_before)
    # the recorded bug fails it; the extracted call with valid values passes (its valid neighbour)
    assert ran.returncode == 1 and "1 failed, 1 passed" in ran.stdout, ran.stdout

    # Patched: every check passes, the invalid boundary values are rejected by the check.
    test_after = after / "tests" / "test_class_index_regression.py"
    done = verify_cli("train.min.py", "--emit-test", str(test_after), cwd=after)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks pass" in done.stdout
    assert re.search(r"ok\s+neighbour target with one entry 4: rejected", done.stdout)
    assert re.search(r"ok\s+neighbour target with one entry -100: fixed", done.stdout)
    assert re.search(r"ok\s+neighbour target with one entry 3: fixed", done.stdout)
    assert re.search(r"ok\s+the original script \(train.py\): fixed", done.stdout)
    ran = pytest_file(test_after)
    assert ran.returncode == 0 and "2 passed" in ran.stdout, ran.stdout


def test_the_class_index_case_is_invalid_data_and_ablate_says_so_again(reduced_fixture, tmp_path):
    work, result = reduced_fixture
    ablated = result.ablation
    assert ablated.kind == "invalid data", ablated
    valid = next(o for o in ablated.outcomes if o.change == "valid values")
    assert (valid.subject, valid.result) == ("the extracted call", "passes")
    assert re.fullmatch(r"\+ x1 = x1\.clamp\(0, 3\)", valid.edit) and valid.output.endswith("all finite")
    report = result.report.read_text()
    assert "| valid values | the extracted call |" in report and "`+ x1 = x1.clamp(0, 3)`" in report
    assert "**The kind: invalid data.**" in report
    case = json.loads((work / "train.min.json").read_text())
    assert case["ablation"]["kind"] == "invalid data" and case["extracted_call"]["op"]

    copy = tmp_path / "copy"
    shutil.copytree(work, copy)
    done = subprocess.run([*EXE, "ablate", "train.min.py", "--json"], cwd=copy, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)["ablation"]
    assert again["kind"] == "invalid data"
    assert {c["change"]: c["outcome"] for c in again["changes"]}["valid values"] == "passes"
    # a case that no longer fails (fixed): exit 3, and why
    patch(copy / "train.min.py")
    done = subprocess.run([*EXE, "ablate", "train.min.py"], cwd=copy, capture_output=True, text=True, timeout=900)
    assert done.returncode == 3 and "does not fail with the recorded bug here" in done.stderr


def test_verify_warns_when_the_fixed_original_processes_fewer_items(tmp_path):
    (tmp_path / "count.py").write_text(
        "import sys, torch, torch.nn.functional as F\n"
        "labels = [0, 1, 4, 2]\n"
        "print(f'dataset: {len(labels)} items', flush=True)\n"
        "for i, y in enumerate(labels):\n"
        "    F.cross_entropy(torch.randn(1, 4), torch.tensor([y]))\n"
    )
    done = subprocess.run([*EXE, "reduce", "count.py", "-k", "out of bounds", "-q", "--confirm", "0", "--max-tests",
                           "5"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # "fix" by skipping the bad item silently
    (tmp_path / "count.py").write_text(
        (tmp_path / "count.py").read_text().replace("labels = [0, 1, 4, 2]",
                                                    "labels = [y for y in [0, 1, 4, 2] if y < 4]")
    )
    done = verify_cli("count.min.py", "--count", r"dataset: (\d+) items", cwd=tmp_path)
    assert "WARN the original now runs but counts fewer items than when it failed (3 < 4" in done.stdout
    assert done.returncode == 4


def test_verify_without_a_case_file_says_what_to_do(tmp_path):
    (tmp_path / "x.py").write_text("pass\n")
    done = verify_cli("x.py", "--json", cwd=tmp_path)
    assert done.returncode == 2 and "no case file" in json.loads(done.stdout)["error"]
