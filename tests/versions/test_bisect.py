"""versions/bisect.py: where "fails the same way" changes, judging as few versions as
bisection needs."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from shrinkgpu.versions.bisect import Side, bisect


def judge_from(sides):
    calls = []

    def judge(i):
        calls.append(i)
        return sides[i]

    return judge, calls


@given(st.integers(min_value=2, max_value=200), st.data())
def test_the_boundary_is_found_with_at_most_two_plus_log2_judgements(count, data):
    flip = data.draw(st.integers(min_value=1, max_value=count - 1))
    sides = [Side.OTHER] * flip + [Side.SAME] * (count - flip)
    judge, calls = judge_from(sides)
    found = bisect(count, judge)
    assert found.boundary == (flip - 1, flip)
    assert len(calls) == len(set(calls))  # never the same version twice
    assert len(calls) <= 2 + math.ceil(math.log2(count - 1)) if count > 2 else len(calls) == 2


def test_a_fix_is_found_the_other_way_round():
    sides = [Side.SAME] * 5 + [Side.OTHER] * 3
    found = bisect(len(sides), judge_from(sides)[0])
    assert found.boundary == (4, 5)


def test_ends_that_agree_are_the_answer_and_nothing_between_is_judged():
    judge, calls = judge_from([Side.SAME] * 9)
    found = bisect(9, judge)
    assert found.boundary is None and found.ends == (0, 8)
    assert calls == [8, 0]


def test_a_version_that_cannot_be_installed_is_stepped_over():
    sides = [Side.OTHER, Side.OTHER, Side.OTHER, Side.SKIP, Side.SAME, Side.SAME, Side.SAME]
    judge, calls = judge_from(sides)
    found = bisect(len(sides), judge)
    assert found.boundary == (2, 4)
    assert found.judged[3] is Side.SKIP


def test_when_every_version_between_is_skipped_the_boundary_is_that_interval():
    sides = [Side.OTHER, Side.SKIP, Side.SKIP, Side.SKIP, Side.SAME]
    found = bisect(len(sides), judge_from(sides)[0])
    assert found.boundary == (0, 4)
    assert [i for i, s in found.judged.items() if s is Side.SKIP] == [2, 1, 3]


def test_uninstallable_ends_move_inwards_and_none_installable_is_no_answer():
    sides = [Side.SKIP, Side.OTHER, Side.SAME, Side.SKIP]
    found = bisect(len(sides), judge_from(sides)[0])
    assert found.boundary == (1, 2) and found.ends == (1, 2)
    nothing = bisect(3, judge_from([Side.SKIP] * 3)[0])
    assert nothing.boundary is None and nothing.ends is None and len(nothing.judged) == 3
