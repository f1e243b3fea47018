"""reducer/result.py: what a reduction writes, where the layout says (whole runs with a
fake executor: the result is what every phase before it returned)."""

from __future__ import annotations

import json

from fakes import NEEDLE, NoCollectEnv, config, executors, fails_with_needle
from shrinkgpu.reducer import reduce
from shrinkgpu.reducer import session as session_module


def test_finish_writes_the_result_its_report_and_case_file_where_the_layout_says(script, monkeypatch):
    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)
    out = script.parent / "out" / "repro.min.py"
    result = reduce(config(script, write=True, output=out, extract=False), executors=executors(fails_with_needle))
    assert result.output == out and out.read_text() == NEEDLE + "\n"  # verified: no partial mark
    assert result.report == out.with_name("repro.min.md")
    report = result.report.read_text()
    assert "PyTorch version: (not collected in this test)" in report
    assert "```python\n" + NEEDLE + "\n```" in report
    case = json.loads(out.with_name("repro.min.json").read_text())
    assert case["case"] == "repro.min.py" and case["signature"]["type"] == "IndexError"
    assert sorted(p.name for p in out.parent.iterdir()) == ["repro.min.json", "repro.min.md", "repro.min.py"]
    assert result.passes and all({"tests", "reproduced", "tokens_removed"} <= set(v) for v in result.passes.values())
    assert result.trace[0][1] == result.tokens_before and result.trace[-1][1] == result.tokens_after
