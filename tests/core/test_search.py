"""core/search.py: the driver that runs passes to a fixpoint over a toy state, with
in-process oracles: budgets, deadlines, interrupts, events, and each search."""

from __future__ import annotations

from dataclasses import dataclass

from shrinkgpu.core import Budget, Improved, reduce_to_fixpoint

from .helpers import P, R


# The driver on a toy state: a tuple of ints, a pass that deletes items.
@dataclass(frozen=True)
class DropItems:
    name: str = "drop"

    def units(self, state, level):
        return list(range(len(state))) if level == 0 else None

    def apply(self, state, units):
        gone = set(units)
        return tuple(x for i, x in enumerate(state) if i not in gone)


@dataclass(frozen=True)
class Halve:
    """A pass with levels: at level k, halve the k-th item (if even)."""

    name: str = "halve"

    def units(self, state, level):
        if level >= len(state):
            return None
        return [level] if state[level] % 2 == 0 and state[level] > 0 else []

    def apply(self, state, units):
        return tuple(x // 2 if i in units else x for i, x in enumerate(state))


def size(state):
    return sum(state) + len(state)


def test_driver_reaches_a_fixpoint_across_passes():
    # Interesting while the sum of items >= 10 and 7 is present.
    def test(state):
        return R if 7 in state and sum(state) >= 10 else P

    outcome = reduce_to_fixpoint((1, 7, 8, 2, 40), [DropItems(), Halve()], test, size)
    assert outcome.stopped is None
    assert 7 in outcome.best and sum(outcome.best) >= 10
    # Nothing left to do: no single pass can shrink the result further.
    for p in (DropItems(), Halve()):
        level = 0
        while (units := p.units(outcome.best, level)) is not None:
            for u in units:
                cand = p.apply(outcome.best, [u])
                assert size(cand) >= size(outcome.best) or test(cand) is not R
            level += 1
    assert outcome.history[0] == (1, 7, 8, 2, 40)
    assert outcome.history[-1] == outcome.best


def test_driver_only_accepts_strictly_smaller_states():
    seen = []

    def test(state):
        seen.append(state)
        return R

    outcome = reduce_to_fixpoint((3, 3), [DropItems()], test, size)
    assert outcome.best == ()
    assert all(size(s) < size((3, 3)) for s in seen)


def test_test_budget_stops_with_the_best_state_so_far():
    def test(state):
        return R if 7 in state else P

    outcome = reduce_to_fixpoint(tuple(range(40)), [DropItems()], test, size, budget=Budget(max_tests=3))
    assert outcome.stopped == "test budget of 3 used up"
    assert outcome.tests == 3
    assert 7 in outcome.best
    assert len(outcome.best) < 40  # the first test (halves) already succeeded


def test_deadline_in_the_past_stops_before_any_test():
    calls = []
    outcome = reduce_to_fixpoint(
        (1, 2, 3), [DropItems()], lambda s: calls.append(s) or R, size, budget=Budget(deadline=0.0)
    )
    assert outcome.stopped == "time limit reached"
    assert calls == [] and outcome.best == (1, 2, 3)


def test_interrupt_keeps_the_best_state():
    state = {"n": 0}

    def test(s):
        state["n"] += 1
        if state["n"] == 3:
            raise KeyboardInterrupt
        return R if 5 in s else P

    outcome = reduce_to_fixpoint(tuple(range(10)), [DropItems()], test, size)
    assert outcome.stopped == "interrupted"
    assert 5 in outcome.best


def test_events_report_improvements():
    events = []
    reduce_to_fixpoint((1, 2, 3, 4), [DropItems()], lambda s: R if 3 in s else P, size, on_event=events.append)
    improved = [e for e in events if isinstance(e, Improved)]
    assert improved and improved[-1].size == size((3,))


def test_driver_with_jobs_gives_the_same_result_as_sequential_under_ddmin():
    # ddmin's complements judged side by side merge to the sequential answer here; probdd
    # tries several prefixes at once and may take another path (its results depend only
    # on ``jobs``), so this is ddmin's property.
    def test(state):
        return R if 7 in state and sum(state) >= 10 else P

    seq = reduce_to_fixpoint((1, 7, 8, 2, 40, 3, 9), [DropItems(), Halve()], test, size, search="ddmin")
    par = reduce_to_fixpoint(
        (1, 7, 8, 2, 40, 3, 9), [DropItems(), Halve()], test, size,
        test_many=lambda states: [test(s) for s in states], jobs=3, search="ddmin",
    )
    assert test(par.best) is R and size(par.best) == size(seq.best)


def test_driver_with_probdd_reaches_the_same_kind_of_fixpoint():
    def test(state):
        return R if 7 in state and sum(state) >= 10 else P

    out = reduce_to_fixpoint((1, 7, 8, 2, 40, 3, 9), [DropItems(), Halve()], test, size, search="probdd")
    assert test(out.best) is R and out.stopped is None
    for p in (DropItems(),):
        for u in p.units(out.best, 0):
            cand = p.apply(out.best, [u])
            assert test(cand) is not R


def test_the_outcome_counts_tested_candidates_whose_verdicts_went_unused():
    def test(state):
        return R if 7 in state else P

    seq = reduce_to_fixpoint(tuple(range(16)), [DropItems()], test, size, search="ddmin")
    par = reduce_to_fixpoint(tuple(range(16)), [DropItems()], test, size,
                             test_many=lambda states: [test(s) for s in states], jobs=4, search="ddmin")
    assert seq.unused == 0
    assert 0 < par.unused < par.tests
    assert par.best == seq.best == (7,)


def test_a_state_whose_size_is_none_is_no_candidate_and_is_never_tested():
    # (the reducer's bound: never more tokens than the start, whatever the cost says)
    tested = []

    class Drop:
        name = "drop"

        def units(self, state, level):
            return list(state) if level == 0 else None

        def apply(self, state, units):
            return tuple(x for x in state if x not in units)

    def test(state):
        tested.append(state)
        return R if 3 in state else P

    # a state without 1 is "larger" than allowed: never tested, never accepted
    outcome = reduce_to_fixpoint((1, 2, 3), [Drop()], test, lambda s: len(s) if 1 in s else None)
    assert outcome.best == (1, 3)
    assert all(1 in s for s in tested) and all(1 in s for s in outcome.history)
