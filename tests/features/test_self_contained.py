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

# An issue's paste: a compiled function fed two literal tensors
DEDUP = """\
import torch


def dedup_first(ids, mask):
    first_pos = {}
    for pos, tok in enumerate(ids.tolist()):
        first_pos.setdefault(tok, pos)
    keep = torch.tensor(sorted(first_pos.values()), dtype=torch.long)
    return ids[keep], mask[keep]


ids = torch.tensor([1, 9, 3, 9, 1])
mask = torch.tensor([True, True, False, True, True])
compiled = torch.compile(dedup_first, fullgraph=True)
print("compiled:", compiled(ids, mask))
"""


def test_a_call_of_literal_tensors_is_cut_to_source_and_the_program_loads_nothing(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(DEDUP)
    saved = tmp_path / "session" / "call.pt"
    saved.parent.mkdir()
    spec = ScriptSpec(script=script, cwd=tmp_path)
    with Runner(spec, isolation=Isolation.FRESH) as runner:
        runner.start()
        first = runner.run({"repro.py": DEDUP}, timeout=300, watch=Watch(cut=str(saved)))
    assert first.signature is not None and "Could not extract specialized integer" in first.signature.message
    with Sandbox(tmp_path) as sandbox:
        cut, data = library_cut(first, spec, sandbox, saved, {"repro.py": DEDUP})
    assert cut.source == 'print("compiled:", compiled(ids, mask))'
    assert cut.replacement == ("compiled(torch.tensor([1, 9, 3, 9, 1], dtype=torch.int64), "
                               "torch.tensor([True, True, False, True, True], dtype=torch.bool))\n")
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
