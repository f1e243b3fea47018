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


def test_parallel_probdd_drops_the_failures_of_a_batch_with_a_success():
    # The needed item sinks whichever prefix holds it; the other prefixes of its batch
    # succeed.  Every candidate handed to on_unused was in a batch with a success, and
    # none is the one accepted.
    oracle = needs({5})
    unused, accepted = [], []
    result = probdd(list(range(12)), oracle, test_many=lambda cs: [oracle(c) for c in cs], jobs=3,
                    on_unused=lambda cs: unused.extend(map(list, cs)), on_accept=lambda k: accepted.append(list(k)))
    assert result == [5]
    assert unused, "a batch of three with one success drops the others' verdicts"
    assert not any(u in accepted for u in unused)
    # what a dropped candidate is: a candidate of a batch, so never the full list
    assert all(len(u) < 12 for u in unused)


def test_sequential_probdd_leaves_nothing_unused():
    oracle = needs({5})
    unused = []
    probdd(list(range(12)), oracle, on_unused=unused.append)
    assert unused == []
