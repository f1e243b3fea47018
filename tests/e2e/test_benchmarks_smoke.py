"""Keeps the evaluation runner working: ``python -m evaluation.run --smoke`` end to end.

The smoke run is shrinkgpu alone on one small fixture with a small test budget, no
peers, and its markdown written into its own work directory (never docs/results.md nor
the baselines).
This checks that it runs, that it prints a result row for shrinkgpu with a positive
token count and an output that still reproduces, and that the shared oracle answers
correctly for the original script and for a script that does not fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # evaluation/ is a top-level package of the repository, not installed
    sys.path.insert(0, str(ROOT))


@pytest.mark.slow
def test_smoke_benchmark_reports_a_reproducing_shrinkgpu_row(tmp_path):
    recorded = [ROOT / "docs" / "results.md", *sorted((ROOT / "evaluation" / "baselines").glob("*.json"))]
    before = [p.read_bytes() if p.exists() else None for p in recorded]
    work = tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, "-m", "evaluation.run", "--smoke", "--workdir", str(work)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(rows) == 1, proc.stdout
    row = rows[0]
    assert "tool=shrinkgpu" in row and "case=class_index" in row
    tokens = int(re.search(r"tokens=(\d+)", row).group(1))
    assert tokens > 0
    assert "reproduce=yes" in row
    # the fixtures' table has a class_index row, and the results are on disk
    assert re.search(r"^\| class_index \| \d+ \|", proc.stdout, re.M)
    results = json.loads((work / "results.json").read_text())
    (sg,) = [r for r in results["reductions"] if r["tool"] == "shrinkgpu"]
    assert sg["tokens"] == tokens and 0 < tokens <= results["cases"]["class_index"]["tokens"]
    assert sg["calls"] and sg["calls"] <= 30
    assert "| class_index |" in (work / "results.md").read_text()
    # the real doc and the baselines are never rewritten by a smoke run
    assert [p.read_bytes() if p.exists() else None for p in recorded] == before


@pytest.mark.slow
def test_shared_oracle_accepts_the_original_and_rejects_a_passing_script(tmp_path):
    from evaluation import catalog, common

    fx = catalog.load("class_index")
    setup = common.setup_oracle(fx.name, fx.dir, fx.script, fx.args, fx.keep_error, tmp_path)
    assert setup.reference["type"] == fx.exception
    state = tmp_path / "state"
    wrapper = setup.wrapper(state)

    original = tmp_path / "a" / fx.script
    original.parent.mkdir()
    original.write_text(fx.path.read_text())
    ok = subprocess.run([str(wrapper), str(original)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # Same message text printed, but no exception: a substring oracle would accept it.
    fake = tmp_path / "b" / fx.script
    fake.parent.mkdir()
    fake.write_text('print("IndexError: Target 4 is out of bounds.")\n')
    bad = subprocess.run([str(wrapper), str(fake)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1

    broken = tmp_path / "c" / fx.script
    broken.parent.mkdir()
    broken.write_text("def (:\n")
    assert subprocess.run([str(wrapper), str(broken)], timeout=60).returncode == 1

    calls = common.read_calls(state)
    assert calls["calls"] == 3
    assert calls["verdicts"] == {"interesting": 1, "no-error": 1, "syntax-error": 1}
    assert (state / "best.py").read_text() == fx.path.read_text()


def test_a_programs_tokens_count_the_local_package_it_imports(tmp_path):
    # A result that keeps a package is counted whole; so must the original be, or its
    # share comes out more than twice too large (pkg_tagger: 1310 tokens instead of 3112).
    from evaluation.common import imported_local_files

    (tmp_path / "tagger").mkdir()
    (tmp_path / "tagger" / "__init__.py").write_text("from .models import Net\n")
    (tmp_path / "tagger" / "models.py").write_text("from . import layers\nfrom .. import nothing\n")
    (tmp_path / "tagger" / "layers.py").write_text("X = 1\n")
    (tmp_path / "tagger" / "unused.py").write_text("Y = 2\n")
    (tmp_path / "heads.py").write_text("import torch\n")
    main = "import heads\nfrom tagger import Net\nimport torch\n"
    assert imported_local_files(main, tmp_path, {"train.py"}) == [
        "heads.py", "tagger/__init__.py", "tagger/models.py", "tagger/layers.py",
    ]


def test_the_sandbox_benchmark_prints_both_costs_and_their_ratio(tmp_path):
    measured = tmp_path / "project"
    for rel in ("s.py", "data/a.txt", "data/b.txt"):
        (measured / rel).parent.mkdir(parents=True, exist_ok=True)
        (measured / rel).write_text("x\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.run([sys.executable, "-m", "evaluation.sandbox", str(measured), "--runs", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.splitlines()[-1]
    assert re.fullmatch(rf"\| {re.escape(str(measured))} \| 4 \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+x \|", row), row
    assert sorted(p.name for p in measured.rglob("*")) == ["a.txt", "b.txt", "data", "s.py"]  # nothing written there
    assert list(temp.iterdir()) == []  # and nothing left in the temporary directory


@pytest.mark.slow
def test_the_overrun_benchmark_measures_a_reduction_past_its_limit(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "evaluation.overrun", "--cases", "class_index", "--factors", "1",
                           "--workdir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [row] = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert row["case"] == "class_index" and row["factor"] == 1.0 and row["limit"] == round(row["original"], 1)
    assert row["overrun"] == pytest.approx(row["wall"] - row["limit"], abs=0.15) and not row["killed"]
    assert row["overrun"] < 10
    assert re.search(r"^largest overrun: [+-]\d+\.\d s \(class_index at 1x\); median", proc.stdout, re.M)


@pytest.mark.slow
def test_the_under_load_benchmark_compares_a_reduction_alone_and_beside_a_burner(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "evaluation.under_load", "--cases", "class_index", "--max-tests", "5",
                           "--burn-max", "120", "--workdir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    [row] = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert row["alone"]["files"] and row["same"] is (row["alone"]["files"] == row["loaded"]["files"])
    assert "| class_index |" in proc.stdout and proc.returncode == (0 if row["same"] else 1)
    # the burner is gone with the benchmark
    left = subprocess.run(["pgrep", "-f", "time.monotonic\\(\\) < end"], capture_output=True, text=True).stdout
    assert not left.strip()
