"""core/verdict.py: the verdicts, named from the reducer's side."""

from __future__ import annotations

from shrinkgpu.core import Verdict


def test_only_a_reproduction_is_interesting():
    assert [v for v in Verdict if v.interesting] == [Verdict.REPRODUCED]


def test_a_verdict_is_its_word():
    assert [v.value for v in Verdict] == ["reproduced", "flaky", "other-error", "passed", "timeout", "crashed",
                                          "invalid"]
    assert Verdict("other-error") is Verdict.OTHER_ERROR and Verdict.FLAKY == "flaky"
