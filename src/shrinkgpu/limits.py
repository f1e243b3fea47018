"""The limits of one reduction, in one object: ``--max-time``'s deadline for the whole run,
the search's share of it, a candidate's time limit, and the test budget.

The search core reads this as its ``Budget`` (``exhausted()`` before each test,
``charge()`` after it); the oracle reads a candidate's limit here before each run; the
reducer's phases tell it what they learn (the original's run time, a reproducing
candidate's, the calibration) and ask it what is left.  Nothing else counts tests or
moves a deadline.
"""

from __future__ import annotations

import time

from shrinkgpu.core import Budget

# Limits of one run, from the runs it is measured on (``calibrated_timeout``).
TIMEOUT_FACTOR = 10.0
TIMEOUT_FLOOR = 5.0
TIMEOUT_CEILING = 600.0
# A fresh run's limit before anything was measured (the first run of the original has
# none at all unless asked: see reducer/original.py).
DEFAULT_FRESH_TIMEOUT = 600.0
# Runs of about the original's length that extraction takes (the capture, the checks).
EXTRACT_RUNS = 2


def calibrated_timeout(walls: list[float]) -> float:
    """A candidate's time limit: a multiple of the slowest of the original's runs in the
    same isolation, between a floor (scheduling noise on a busy machine) and a ceiling.
    The ceiling is never under twice the slowest run: a run of the whole original (the
    one that saves the state, the replay's check) must be able to end."""
    base = max(walls) if walls else DEFAULT_FRESH_TIMEOUT / TIMEOUT_FACTOR
    return min(max(TIMEOUT_CEILING, 2.0 * base), max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * base + 1.0))


def warm_timeout(cold: float, warm: list[float]) -> float:
    """A candidate's time limit when every candidate starts with the compile caches of a
    run of the original (``cold``: that run, which compiled from nothing; ``warm``: the
    runs after it, with the caches).  A candidate that keeps the compiled graphs finds
    them built and runs like ``warm``; one that changes a graph compiles it anew, which
    takes at most what the cold run spent compiling.  So: the warm runs' limit plus one
    cold run, never more than the cold run's own limit (10x a cold run is minutes for a
    compiled training step whose candidates take seconds)."""
    return min(calibrated_timeout([cold, *warm]), calibrated_timeout(warm) + cold)


def checks_reserve(verify_runs: int, original_wall: float, result_wall: float, import_seconds: float) -> float:
    """Seconds the search leaves under --max-time for what follows it: verifying runs the
    result ``verify_runs`` times in fresh interpreters (extraction is done before the
    search).  The result's time falls as it shrinks (a training loop cut), so the
    reduction asks again at every reproducing candidate; the original's does not.
    ``result_wall`` is a forked run's, which lacks a fresh interpreter's imports
    (``import_seconds``, the preload's time)."""
    fresh_result = min(original_wall, result_wall + import_seconds) + 0.5
    return verify_runs * fresh_result


class Limits(Budget):
    """``max_time``: seconds for the whole reduction from ``started`` (None: no bound);
    ``max_tests``: runs the search may charge, the runs a rebase makes included;
    ``timeout``: a candidate's limit the user gave (None: calibrated, then following
    the program candidates are cut from); ``verify_runs``: the fresh checks the search
    leaves time for."""

    def __init__(self, *, started: float | None = None, max_time: float | None = None,
                 max_tests: int | None = None, timeout: float | None = None, verify_runs: int = 0):
        super().__init__(max_tests=max_tests)
        self.started = time.monotonic() if started is None else started
        self.end = None if max_time is None else self.started + max_time
        self.asked_timeout = timeout
        self.verify_runs = verify_runs
        # A candidate's limit, and a fresh interpreter's (it pays for its imports again);
        # set by the calibration.
        self.timeout = timeout if timeout is not None else DEFAULT_FRESH_TIMEOUT
        self.fresh_timeout = self.timeout
        self.calibrated = self.timeout
        # What the search's deadline is measured from (``searching``): the original's
        # first run, and a fresh interpreter's imports.
        self.original_wall = 0.0
        self._import_seconds = 0.0

    # -- the whole run ----------------------------------------------------------------
    def left(self) -> float | None:
        """Seconds left of --max-time, which bounds the whole run, first run included."""
        return None if self.end is None else max(0.1, self.end - time.monotonic())

    def out_of_time(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- a candidate's limit ------------------------------------------------------------
    def calibrate(self, timeout: float, fresh_timeout: float) -> None:
        """The limits the calibration measured: a candidate's (unless the user gave one)
        and a fresh interpreter's."""
        self.timeout = self.calibrated = timeout
        self.fresh_timeout = fresh_timeout

    def follow(self, wall: float) -> float | None:
        """A candidate's limit follows the program it was cut from, not the original: one
        derived from a program that runs 2 s (its training loop cut, or started at the
        failing step) gets what that one takes, times the same margin, never more than
        the calibrated limit; a --timeout the user gave stays.  The new limit when it
        at least halves the current one, else None (no change)."""
        if self.asked_timeout is not None:
            return None
        limit = min(self.calibrated, calibrated_timeout([wall]))
        if limit < self.timeout / 2:
            self.timeout = limit
            return limit
        return None

    def fresh_limit(self, wall: float) -> float:
        """The limit of one more fresh run of a program that took ``wall``, within what
        --max-time leaves."""
        limit = self.asked_timeout or calibrated_timeout([wall])
        left = self.left()
        return limit if left is None else min(limit, left)

    def run_limit(self) -> float:
        """A candidate's limit now: its own, and never past --max-time (a run that
        starts near the end would otherwise hold the result back by a whole limit)."""
        left = self.left()
        return self.timeout if left is None else min(self.timeout, left)

    # -- the search's deadline ------------------------------------------------------------
    def searching(self, original_wall: float, expected_wall: float, import_seconds: float) -> None:
        """The search starts: it must stop early enough to leave the checks after it what
        they take, from a result expected to run ``expected_wall``."""
        self.original_wall = original_wall
        self._import_seconds = import_seconds
        self.saw_result(expected_wall)

    def saw_result(self, wall: float) -> None:
        """A candidate the search may keep ran ``wall``: the time kept for the final
        checks follows it at once."""
        if self.end is None:
            self.deadline = None
            return
        self.deadline = self.end - checks_reserve(self.verify_runs, self.original_wall, wall, self._import_seconds)
