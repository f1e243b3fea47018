"""reducer/stats.py: tests and tokens removed per pass, counted from a reduction's events."""

from __future__ import annotations

from shrinkgpu.core import PassStarted, Verdict
from shrinkgpu.core import Tested as Judged  # (not a test class)
from shrinkgpu.reducer.events import BestSoFar, Reducing
from shrinkgpu.reducer.stats import PassStats


def judged(verdict: Verdict) -> Judged:
    return Judged(verdict, size=1, best=2, tests=0)


def test_each_pass_gets_its_tests_its_reproductions_and_the_tokens_it_removed():
    stats = PassStats()
    for event in (
        Reducing({}, "a.py", 100),
        PassStarted("delete-statements", 0, 5, 100),
        judged(Verdict.PASSED), judged(Verdict.REPRODUCED), BestSoFar({}, "a.py", 60), judged(Verdict.FLAKY),
        PassStarted("propagate-constants", 0, 2, 60),
        judged(Verdict.REPRODUCED), BestSoFar({}, "a.py", 55),
        object(),  # what it does not count goes by
    ):
        stats(event)
    assert stats.tested == 4
    assert stats.to_json() == {
        "delete-statements": {"tests": 3, "reproduced": 1, "tokens_removed": 40},
        "propagate-constants": {"tests": 1, "reproduced": 1, "tokens_removed": 5},
    }


def test_tests_before_any_pass_are_the_setups_and_a_best_before_the_search_removes_nothing():
    stats = PassStats()
    stats(judged(Verdict.REPRODUCED))
    stats(BestSoFar({}, "a.py", 80))  # no size known yet: nothing to subtract from
    stats(PassStarted("cut-hot-loops", 0, 1, 80))
    stats(BestSoFar({}, "a.py", 70))
    assert stats.to_json() == {"setup": {"tests": 1, "reproduced": 1, "tokens_removed": 0},
                               "cut-hot-loops": {"tests": 0, "reproduced": 0, "tokens_removed": 10}}
