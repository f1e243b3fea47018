"""core/rates.py: the sequential test that tells a flaky candidate as good as the original
from a worse one; pure arithmetic."""

from __future__ import annotations

import pytest

from shrinkgpu.core.rates import RateTest, describe_rate


def test_the_sequential_test_tells_a_worse_candidate_from_a_good_one():
    good, worse = RateTest(0.5), RateTest(0.5)
    for k in range(40):
        if not good.decided:
            good.add(k % 2 == 0)  # reproduces half the time, like the original
        if not worse.decided:
            worse.add(k % 8 == 0)  # one run in eight
    assert good.accepted is True and worse.accepted is False
    sure = RateTest(1.0)
    sure.add(False)
    assert sure.accepted is False  # an original that never missed: one miss decides


def test_runs_already_made_are_judged_by_the_evidence_or_else_by_the_observed_rate():
    # p0 = 0.5: five reproductions in a row, or eight misses, are evidence enough ...
    assert RateTest.judge(0.5, reproduced=5, runs=5) is True
    assert RateTest.judge(0.5, reproduced=0, runs=8) is False
    # ... three runs are not: the rate decides against the midpoint of p0 and p0 / 2 (0.375)
    assert RateTest.judge(0.5, reproduced=2, runs=3) is True
    assert RateTest.judge(0.5, reproduced=1, runs=3) is False


def test_an_undecided_test_is_decided_by_the_observed_rate_after_its_last_run():
    test = RateTest(0.5, max_runs=4)
    for reproduced in (True, False, True):
        test.add(reproduced)
        assert test.accepted is None and not test.decided
    test.add(False)
    assert test.accepted is True and test.rate == 0.5  # 2 of 4 >= 0.375


def test_an_original_rate_outside_zero_to_one_is_refused():
    for p0 in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="must be in"):
            RateTest(p0)


def test_a_rate_is_described_as_runs_and_a_percentage():
    assert describe_rate(3, 4) == "3 of 4 runs (75%)"
    assert describe_rate(1, 3) == "1 of 3 runs (33%)"
    assert describe_rate(0, 0) == "no runs"
