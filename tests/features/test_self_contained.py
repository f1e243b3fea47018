"""Self-contained first (issue 48, item 1): the library's call is written into the
program as source when its arguments have an exact form, so the result loads nothing;
a result that must load it is written back as source after the search when that alone
fails the same way; and the reduction says which artifact runs alone.  Real workers,
real torch on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.reducer.facts import library_cut
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation, Runner, Sandbox, ScriptSpec, Watch

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("short_scripts_stay_short")]

# An issue's paste: a compiled function fed two literal tensors (written for this test:
# the corpus's compile cases are held out)
CLIP = """\
import torch


@torch.compile(fullgraph=True)
def clip_scores(scores, limit):
    if scores.max() > limit:
        return scores.clamp(max=limit)
    return scores


scores = torch.tensor([0.25, 3.5, 1.0])
limit = torch.tensor(2.0)
print("clipped:", clip_scores(scores, limit))
"""


def test_a_call_of_literal_tensors_is_cut_to_source_and_the_program_loads_nothing(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(CLIP)
    saved = tmp_path / "session" / "call.pt"
    saved.parent.mkdir()
    spec = ScriptSpec(script=script, cwd=tmp_path)
    with Runner(spec, isolation=Isolation.FRESH) as runner:
        runner.start()
        first = runner.run({"repro.py": CLIP}, timeout=300, watch=Watch(cut=str(saved)))
    assert first.signature is not None and first.signature.headline.startswith(
        "torch._dynamo.exc.Unsupported: Data-dependent branching")
    with Sandbox(tmp_path) as sandbox:
        cut, data = library_cut(first, spec, sandbox, saved, {"repro.py": CLIP})
    assert cut.source == 'print("clipped:", clip_scores(scores, limit))'
    # (float32, torch's default, needs no dtype)
    assert cut.replacement == "clip_scores(torch.tensor([0.25, 3.5, 1.0]), torch.tensor(2.0))\n"
    assert data == {} and cut.loads == ""


# A library's call whose arguments are too large to write as literals: the rows of a
# ragged batch, 99 and 100 values each; the check that raises is the user's own, so no
# torch call is extracted either
RAGGED = """\
import torch
from torch.utils.data import DataLoader


def make_rows(seed, n, width):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        length = width if i % 7 else width - 1
        noise = torch.randn(length, generator=g)
        scale = 1.0 + 0.1 * (i % 3)
        offset = float(i) / n
        rows.append(noise * scale + offset)
    return rows


def collate(rows):
    lengths = {len(r) for r in rows}
    if len(lengths) > 1:
        raise ValueError(f"ragged batch: lengths {sorted(lengths)}")
    return torch.stack(rows)


rows = make_rows(seed=3, n=20, width=100)
for batch in DataLoader(rows, batch_size=4, collate_fn=collate):
    print(batch.mean())
"""


def test_a_result_that_loads_the_call_is_written_back_as_source_that_runs_alone(tmp_path):
    script = tmp_path / "job" / "rows.py"
    script.parent.mkdir()
    script.write_text(RAGGED)
    out = tmp_path / "out" / "rows.min.py"
    result = reduce(ReduceConfig(script=script, keep_error="ragged batch", output=out, verify_runs=1, confirm=0,
                                 max_tests=40, jobs=1, ablate=False, env={**os.environ}))
    text = out.read_text()
    # the cut was worth its file: the pipeline went, the call is loaded
    assert "rows.call.pt" in text and "make_rows" not in text, text
    assert result.extracted is None and result.alone is not None
    assert result.alone["artifact"] == "result written back" and result.alone["checked"]
    assert result.alone["result_needs"] == ["it loads `rows.call.pt`"]
    alone = out.with_name("rows.min.alone.py")
    written = alone.read_text()
    assert "rows.call.pt" not in written and "torch.randn(99)" in written and "torch.randn(100)" in written
    # with no file beside it: the same first error, under plain python
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / alone.name).write_text(written)
    run = subprocess.run([sys.executable, alone.name], cwd=empty, capture_output=True, text=True, timeout=120)
    assert "ValueError: ragged batch: lengths [99, 100]" in run.stderr, run.stderr
    report = result.report.read_text()
    assert "**Runs alone:** `rows.min.alone.py`, the minimal example with the call it loads written as source" in report
    assert report.index(written.strip().splitlines()[-1]) < report.index("rows.call.pt')")
    assert Target(result.signature).matches(result.final_signature)
