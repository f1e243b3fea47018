"""core/probdd.py: probabilistic delta debugging, driven by in-process oracles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.core import ddmin, probdd

from .helpers import P, R, needs


@given(st.lists(st.integers(0, 200), unique=True, max_size=50), st.data(), st.integers(1, 3))
def test_probdd_finds_exactly_the_needed_items_under_a_monotone_oracle(items, data, jobs):
    required = data.draw(st.sets(st.sampled_from(items), max_size=6)) if items else set()
    oracle = needs(required)
    result = probdd(items, oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=jobs)
    assert result == [x for x in items if x in required]


@settings(max_examples=200)
@given(st.lists(st.integers(0, 30), unique=True, min_size=1, max_size=25), st.integers(0, 2**32 - 1))
def test_probdd_result_is_one_minimal_for_any_deterministic_oracle(items, seed):
    full = frozenset(items)

    def oracle(kept):
        kept = frozenset(kept)
        return R if kept == full or hash((seed, kept)) % 3 == 0 else P

    result = probdd(items, oracle)
    assert oracle(result) is R
    for x in result:
        assert oracle([y for y in result if y != x]) is not R


def test_probdd_needs_fewer_tests_than_ddmin_when_few_items_can_go():
    # 40 items, 30 of them needed: the regime of a program that is mostly reduced.
    required = set(range(0, 40, 4)) | set(range(1, 40, 4)) | set(range(2, 40, 4))
    counts = {}
    for name, search in (("ddmin", ddmin), ("probdd", probdd)):
        calls = []

        def oracle(kept, calls=calls):
            calls.append(1)
            return needs(required)(kept)

        assert set(search(list(range(40)), oracle)) == required
        counts[name] = len(calls)
    assert counts["probdd"] < counts["ddmin"], counts


def test_a_prior_of_needed_units_saves_tests():
    required = set(range(0, 30, 2))
    plain, seeded = [], []
    probdd(list(range(30)), lambda k: plain.append(1) or needs(required)(k))
    probdd(list(range(30)), lambda k: seeded.append(1) or needs(required)(k),
           prior=lambda i: 0.9 if i in required else 0.1)
    assert len(seeded) < len(plain)
