"""limits.py: one reduction's deadline, a candidate's time limit and the test budget."""

from __future__ import annotations

import time

import pytest

from shrinkgpu.limits import Limits, calibrated_timeout, checks_reserve, warm_timeout


def test_the_time_kept_for_the_final_checks_follows_the_results_run_time():
    # A 34 s original whose training loop the first candidate cut (a 0.2 s forked run,
    # 2.3 s of imports in a fresh one): two short fresh runs, not two of the original.
    assert checks_reserve(2, 34.0, 0.2, 2.3) == pytest.approx(2 * 3.0)
    # Before any cut, the result is the original: a run costs no more than the original's.
    assert checks_reserve(2, 34.0, 34.0, 2.3) == pytest.approx(2 * 34.5)


def test_a_runs_limit_lets_a_whole_run_of_the_original_end():
    assert calibrated_timeout([1.0]) == 11.0
    assert calibrated_timeout([100.0]) == 600.0  # the ceiling for candidates
    # an original of 15 minutes: the run that saves its state must not be killed at 10
    assert calibrated_timeout([900.0]) == 1800.0


def test_the_search_deadline_leaves_the_checks_their_time_and_follows_the_result():
    limits = Limits(started=time.monotonic(), max_time=300.0, verify_runs=2)
    assert limits.deadline is None  # nothing bounds the phases before the search
    limits.searching(original_wall=34.0, expected_wall=34.0, import_seconds=2.3)
    assert limits.end - limits.deadline == pytest.approx(2 * 34.5)
    limits.saw_result(0.2)
    assert limits.end - limits.deadline == pytest.approx(2 * 3.0)
    assert Limits(max_time=None).left() is None


def test_a_candidates_limit_follows_the_program_it_is_cut_from_unless_the_user_gave_one():
    limits = Limits()
    limits.calibrate(timeout=600.0, fresh_timeout=600.0)
    assert limits.follow(100.0) is None  # 600 s is not halved: no change
    assert limits.follow(2.0) == 21.0 and limits.timeout == 21.0
    assert limits.follow(1.5) is None  # 16 s does not halve 21 s
    given = Limits(timeout=30.0)
    given.calibrate(timeout=30.0, fresh_timeout=30.0)
    assert given.follow(0.1) is None and given.timeout == 30.0


def test_every_run_charged_counts_once_against_the_test_budget():
    limits = Limits(max_tests=3)
    limits.charge()
    limits.charge(2)
    assert limits.exhausted() == "test budget of 3 used up"
    assert Limits(max_time=0.0).out_of_time()


def test_with_warm_compile_caches_a_candidates_limit_follows_the_warm_runs_plus_one_cold_compile():
    # Measured on evaluation/cases/compiled_gradnorm_donated: 39.6 s compiling from
    # nothing, 6.1 s with the caches every candidate starts with.  10x the cold run
    # was 397 s, longer than the whole --max-time.
    assert warm_timeout(39.6, [6.1]) == pytest.approx(6.1 * 10 + 1 + 39.6)
    assert warm_timeout(39.6, [6.1]) < calibrated_timeout([39.6]) / 3
    # never more than the cold run's own limit, and never under the floor
    assert warm_timeout(0.5, [0.4]) <= calibrated_timeout([0.5])
    assert warm_timeout(10.0, [9.0]) == calibrated_timeout([10.0])
    assert warm_timeout(0.1, [0.05]) >= 5.0


def test_a_candidate_never_runs_past_the_reductions_end():
    limits = Limits(max_time=3.0)
    limits.calibrate(timeout=400.0, fresh_timeout=400.0)
    assert limits.run_limit() <= 3.0
    unbounded = Limits()
    unbounded.calibrate(timeout=400.0, fresh_timeout=400.0)
    assert unbounded.run_limit() == 400.0


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_run_that_could_not_end_in_time_is_refused_and_kept_for_the_note():
    clock = Clock()
    limits = Limits(max_time=300.0, clock=clock)
    clock.now += 251.0  # 49 s left
    slot = limits.slot("the start without the training loop", 120.0, 600.0)
    assert slot.timeout is None
    assert slot.refused == "the start without the training loop was not tried: 49 s left of --max-time, it takes 120 s"
    granted = limits.slot("the check of the extracted call", 3.2, 300.0)
    assert granted.timeout == 49.0 and granted.refused is None  # its limit, clipped to what is left
    assert limits.would_buy() == ("--max-time 300 s ended the reduction before the start without the training loop "
                                  "(120 s): a larger --max-time buys each, for the time in parentheses")
    assert Limits(clock=clock).slot("anything", 1e9, 7.0).timeout == 7.0  # no --max-time: every run, its own limit
    assert Limits(clock=clock).would_buy() is None


def test_past_the_end_nothing_is_granted_and_every_limit_is_clipped():
    clock = Clock()
    limits = Limits(max_time=10.0, clock=clock)
    clock.now += 12.0
    assert limits.left() == 0.0 and limits.out_of_time()
    assert limits.slot("a run that takes nothing", 0.0, 5.0).refused is not None
    assert limits.clip(600.0) == 0.1 and limits.fresh_limit(3.0) == 0.1


def test_run_lengths_are_measured_in_imports_of_torch_so_a_busy_machine_decides_alike():
    idle, busy = Limits(), Limits()
    idle.paced(1.6)
    busy.paced(4.8)  # three times slower: the import and the run alike
    assert idle.startups(16.0) == pytest.approx(busy.startups(48.0)) == pytest.approx(10.0)
    unmeasured = Limits()
    unmeasured.paced(None)  # torch was loaded before the probe: the development machine's pace
    unmeasured.paced(0.001)
    assert unmeasured.startup == 1.6


def test_candidates_and_the_proposer_stay_within_the_searchs_share_of_the_limit():
    clock = Clock()
    limits = Limits(max_time=100.0, verify_runs=2, clock=clock)
    limits.calibrate(timeout=50.0, fresh_timeout=50.0, wall=1.0)
    limits.searching(original_wall=10.0, expected_wall=10.0, import_seconds=1.0)
    # the checks after the search keep 2 x 10.5 s: a candidate started at 70 s ends by 79 s
    clock.now += 70.0
    assert limits.search_left() == pytest.approx(9.0) and limits.run_limit() == pytest.approx(9.0)
    assert limits.fresh_result() == pytest.approx(10.5)


def test_what_is_no_run_is_waited_for_within_the_limit_and_a_moment_of_the_grace():
    clock = Clock()
    limits = Limits(max_time=10.0, clock=clock)
    assert limits.wait(120.0) == 10.0
    clock.now += 30.0
    assert limits.wait(120.0) == 1.0
    assert Limits(clock=clock).wait(120.0) == 120.0
