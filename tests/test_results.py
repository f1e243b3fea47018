"""results.py: what a reduction hands back, and its ``--json`` form (docs/outputs.md)."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import signature
from shrinkgpu.results import Ablation, Extraction, OracleStats, ReductionResult
from shrinkgpu.worker import Isolation


def result(**kw) -> ReductionResult:
    values = dict(
        output=Path("/w/train.min.py"), report=Path("/w/train.min.md"), files={"train.py": "explode(3)\n"},
        main="train.py", signature=signature(), final_signature=signature(), tokens_before=400, tokens_after=12,
        candidates_tested=31, oracle=OracleStats(runs=40, cache_hits=3, invalid=2, by_verdict={"reproduced": 9},
                                                 other_errors={"NameError": 4}),
        seconds=12.3456, stopped=None, verified=(2, 2), isolation=Isolation.FORK, preload_modules=812, timeout=9.5,
    )
    values.update(kw)
    return ReductionResult(**values)


def test_the_json_of_a_result_holds_its_counts_and_files_as_plain_values():
    data = json.loads(json.dumps(result().to_json()))  # what --json prints, read back
    assert (data["output"], data["report"], data["tokens_before"], data["tokens_after"], data["ratio"]) == (
        "/w/train.min.py", "/w/train.min.md", 400, 12, 0.03)
    assert (data["runs"], data["cache_hits"], data["invalid_skipped"], data["verdicts"], data["other_errors"]) == (
        40, 3, 2, {"reproduced": 9}, {"NameError": 4})
    assert (data["seconds"], data["stopped_early"], data["stop_reason"]) == (12.346, False, None)
    assert (data["verified"], data["isolation"], data["preloaded_modules"]) == (
        {"reproduced": 2, "runs": 2}, "fork", 812)
    assert data["signature"]["type"] == "IndexError" and data["signature"]["op"]["name"] == signature().op.name
    assert data["extracted"] is None and data["ablation"] is None


def test_a_stopped_result_says_why_and_a_flaky_one_its_rate():
    data = result(stopped="test budget of 3 used up", original_rate=(7, 10), tokens_before=0).to_json()
    assert (data["stopped_early"], data["stop_reason"]) == (True, "test budget of 3 used up")
    assert data["original_rate"] == {"reproduced": 7, "runs": 10}
    assert data["ratio"] is None  # nothing to divide by


def test_the_extracted_call_and_the_comparisons_in_json():
    extracted = Extraction(path=Path("/w/train.min.extracted.py"), data=None, text="...", level="metadata", lines=3,
                           signature=signature(), op="torch.nn.functional.cross_entropy")
    ablation = Ablation(outcomes=(), kind="invalid data", reason="valid targets pass", seconds=1.23456)
    data = result(extracted=extracted, ablation=ablation).to_json()
    assert data["extracted"] == {"script": "/w/train.min.extracted.py", "data": None, "level": "metadata",
                                 "lines": 3, "note": None, "holds": None}
    assert data["ablation"] == {"kind": "invalid data", "reason": "valid targets pass", "hint": None, "stage": None,
                                "seconds": 1.235, "changes": []}
    assert not extracted.compiled
    loaded = Extraction(path=Path("/w/train.extracted.py"), data=Path("/w/train.extracted.pt"), text="...",
                        level="exact", lines=2, signature=signature(), op="torch.serialization.load",
                        holds="`last.pt` as the run wrote it (1.2 KiB): it holds the user's weights", loader=True)
    assert result(extracted=loaded).to_json()["extracted"]["holds"] == (
        "`last.pt` as the run wrote it (1.2 KiB): it holds the user's weights")
    assert Extraction(path=Path("x"), data=None, text="", level="exact", lines=1, signature=signature(),
                      op="torch.compile(gate, fullgraph=True)").compiled


def test_where_the_candidates_ran_and_what_running_them_side_by_side_cost():
    from shrinkgpu.report import where_it_ran
    from shrinkgpu.worker import Placement

    on_ray = result(placement=Placement("ray", ("n1", "n2"), 8), jobs=8, search_seconds=10.0, unused_runs=4,
                    candidates_tested=40)
    data = on_ray.to_json()
    assert (data["executor"], data["nodes"], data["workers"], data["jobs"]) == ("ray", ["n1", "n2"], 8, 8)
    assert data["candidates_per_second"] == 4.0
    assert data["speculation"] == {"unused_runs": 4, "share": 0.1}
    assert where_it_ran(on_ray) == ("ray, 2 nodes, 8 workers, 8 candidates at once; 4.00 candidates/s in the search; "
                                    "4 run(s) beside others went unused (10%)")
    # the local executor: one worker per candidate in flight; nothing run beside another
    alone = result(placement=Placement("local", ("host",)), jobs=1)
    data = alone.to_json()
    assert (data["executor"], data["nodes"], data["workers"]) == ("local", ["host"], 1)
    assert data["candidates_per_second"] is None  # no search time: no pace to give
    assert where_it_ran(alone) == "local, 1 node, 1 worker, 1 candidate at once"
