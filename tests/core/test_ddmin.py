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


def test_parallel_ddmin_says_which_verdicts_of_a_batch_it_did_not_use():
    # Item 0 needed: each batch's success is its last complement ([0, 1], then [0]), so
    # nothing was run after a success and nothing is unused.
    oracle = needs({0})
    unused = []
    ddmin([0, 1, 2, 3], oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=4, on_unused=unused.append)
    assert unused == []
    # Item 3 needed, on [0..7] with jobs=2: [4..7] fails, [0..3] succeeds; then on
    # [0..3], [2, 3] succeeds first and [0, 1] beside it fails: one at a time, the search
    # would never have run [0, 1].
    oracle = needs({3})
    unused = []
    result = ddmin([0, 1, 2, 3, 4, 5, 6, 7], oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=2,
                   on_unused=unused.append)
    assert result == [3]
    dropped = [c for batch in unused for c in batch]
    assert [0, 1] in dropped and [2, 3] not in dropped


def test_sequential_ddmin_leaves_nothing_unused():
    oracle = needs({3})
    unused = []
    ddmin(list(range(8)), oracle, on_unused=unused.append)
    assert unused == []
