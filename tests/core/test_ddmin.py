"""core/ddmin.py: complement-only delta debugging, alone and with candidates judged
several at a time, driven by in-process oracles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.core import ddmin

from .helpers import P, R, needs


@given(st.lists(st.integers(0, 200), unique=True, max_size=60), st.data())
def test_ddmin_finds_exactly_the_needed_items_under_a_monotone_oracle(items, data):
    required = data.draw(st.sets(st.sampled_from(items), max_size=6)) if items else set()
    result = ddmin(items, needs(required))
    assert set(result) == required
    assert result == [x for x in items if x in required]  # order preserved


@settings(max_examples=200)
@given(st.lists(st.integers(0, 30), unique=True, min_size=1, max_size=25), st.integers(0, 2**32 - 1))
def test_ddmin_result_is_one_minimal_for_any_deterministic_oracle(items, seed):
    # An arbitrary (non-monotone) but deterministic oracle; the full list is interesting.
    full = frozenset(items)

    def oracle(kept):
        kept = frozenset(kept)
        if kept == full:
            return R
        return R if hash((seed, kept)) % 3 == 0 else P

    result = ddmin(items, oracle)
    assert oracle(result) is R
    for x in result:
        assert oracle([y for y in result if y != x]) is not R


def test_ddmin_tries_removing_everything_first():
    calls = []

    def oracle(kept):
        calls.append(list(kept))
        return R

    assert ddmin([1, 2, 3, 4], oracle) == []
    assert calls == [[]]


def test_ddmin_never_calls_the_oracle_with_the_input_itself():
    seen = []

    def oracle(kept):
        seen.append(tuple(kept))
        return R if 5 in kept else P

    ddmin(list(range(10)), oracle)
    assert tuple(range(10)) not in seen


# -- parallel ddmin -------------------------------------------------------------------------
def batched(oracle, log):
    def many(cands):
        log.append(len(cands))
        return [oracle(c) for c in cands]

    return many


@given(st.lists(st.integers(0, 200), unique=True, max_size=40), st.data(), st.integers(2, 4))
def test_parallel_ddmin_finds_the_same_minimum_under_a_monotone_oracle(items, data, jobs):
    required = data.draw(st.sets(st.sampled_from(items), max_size=5)) if items else set()
    log = []
    result = ddmin(items, needs(required), test_many=batched(needs(required), log), jobs=jobs)
    assert result == [x for x in items if x in required]
    assert all(n <= jobs for n in log)


@settings(max_examples=100)
@given(st.lists(st.integers(0, 30), unique=True, min_size=1, max_size=20), st.integers(0, 2**32 - 1))
def test_parallel_ddmin_is_one_minimal_and_deterministic(items, seed):
    full = frozenset(items)

    def oracle(kept):
        kept = frozenset(kept)
        return R if kept == full or hash((seed, kept)) % 3 == 0 else P

    first = ddmin(items, oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=3)
    again = ddmin(items, oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=3)
    assert first == again
    assert oracle(first) is R
    for x in first:
        assert oracle([y for y in first if y != x]) is not R


def test_parallel_ddmin_merges_two_successes_of_one_batch():
    # Items 0 and 11 are needed.  At n=2 neither half can go; at n=4 the chunks are
    # [0,1,2] [3,4,5] [6,7,8] [9,10,11] and one batch of 4 finds the middle two
    # removable: removing both at once is tried, succeeds, and is taken in one step.
    oracle = needs({0, 11})
    accepted = []
    result = ddmin(list(range(12)), oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=4,
                   on_accept=lambda kept: accepted.append(list(kept)))
    assert result == [0, 11]
    assert accepted[0] == [0, 1, 2, 9, 10, 11]
