"""reducer/extraction.py: the failing call alone before the search, with a fake executor."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import bug, config, fails_with_needle, passes, signature
from shrinkgpu.reducer.extraction import finish_extraction, plan_extraction
from shrinkgpu.signature import Target


def save_capture(capture) -> None:
    """What the probe saves of a captured cross_entropy call (its record; no tensors are
    needed for the metadata level, whose floats are random and labels inline)."""
    meta = {"dtype": "float32", "shape": [3, 4], "stride": [4, 1], "offset": 0, "device": "cpu",
            "requires_grad": False, "shares_with": None, "parameter": False}
    target = {**meta, "dtype": "int64", "shape": [3], "stride": [1], "values": [0, 2, 4]}
    record = {"op": capture.op, "args": [{"t": "args[0]"}, {"t": "args[1]"}], "kwargs": {}, "nondefault": [],
              "meta": {"args[0]": meta, "args[1]": target}}
    Path(capture.path + ".json").write_text(json.dumps(record))


def extracted_call_fails(text, job):
    """The extracted call fails at cross_entropy as the original did."""
    return bug() if "cross_entropy(" in text else fails_with_needle(text, job)


def test_a_call_the_first_run_could_not_keep_is_captured_by_the_next_run_and_written(script, contexts):
    ctx = contexts(config(script, write=True), extracted_call_fails)
    first = bug()
    extracting = plan_extraction(ctx, first, Target(first.signature))
    assert extracting.extracted.extraction is None and extracting.capture is not None
    assert extracting.capture.path == str(ctx.scratch.capture)  # never the library call's file
    save_capture(extracting.capture)  # (the run before the search: reducer/start.py)
    extracted = finish_extraction(ctx, extracting, Target(first.signature), first, bug())
    path = script.parent / "train.extracted.py"
    assert extracted.extraction is not None and extracted.extraction.path == path
    assert extracted.extraction.level == "metadata"
    text = path.read_text()
    assert "torch.nn.functional.cross_entropy(" in text and "torch.tensor([0, 2, 4]" in text
    # its check ran through the fake executors: no process anywhere
    assert any("cross_entropy(" in text for text in ctx.executors.log.texts)


def test_a_call_not_reached_in_the_capture_run_is_said(script, contexts):
    ctx = contexts(config(script, write=True))
    first = bug()
    extracting = plan_extraction(ctx, first, Target(first.signature))
    extracted = finish_extraction(ctx, extracting, Target(first.signature), first, passes())
    assert extracted.extraction is None
    assert extracted.error == "the call was not reached in the capture run (finished without error (exit status 0))"
    assert f"the failing call was not extracted: {extracted.error}" in ctx.talk.notes


def test_an_error_no_call_raised_is_not_extracted_and_needs_no_run(script, contexts):
    ctx = contexts(config(script, write=True))
    first = bug(signature("ValueError", "bad config", op=None))
    extracting = plan_extraction(ctx, first, Target(first.signature))
    assert extracting.capture is None and ctx.executors.log.jobs == []
    assert extracting.extracted.error == "the first error was not raised by a torch call: there is no call to extract"


def test_nothing_is_extracted_when_nothing_is_written(script, contexts):
    ctx = contexts(config(script, write=False, extract=True))
    first = bug()
    extracting = plan_extraction(ctx, first, Target(first.signature))
    assert extracting.capture is None and extracting.extracted.extraction is None and extracting.extracted.error is None


def test_a_check_of_the_extracted_call_that_could_not_end_in_time_is_not_started_and_said(script, contexts):
    ctx = contexts(config(script, write=True, max_time=60), extracted_call_fails)
    ctx.limits.end = ctx.limits.now() + 2.0  # 2 s left: a check takes two imports of torch (3.2 s)
    first = bug()
    extracting = plan_extraction(ctx, first, Target(first.signature))
    save_capture(extracting.capture)
    extracted = finish_extraction(ctx, extracting, Target(first.signature), first, bug())
    assert extracted.extraction is None and ctx.executors.log.jobs == []
    assert extracted.error == "the check of the extracted call was not tried: 2.0 s left of --max-time, it takes 3.2 s"
    assert not (script.parent / "train.extracted.py").exists()
