"""The limits of one reduction, in one object: ``--max-time``'s deadline for the whole
command, the search's share of it, every run's time limit, the test budget, and the pace
of this machine that decisions on a run's length are measured in.

The search core reads this as its ``Budget`` (``exhausted()`` before each test,
``charge()`` after it); the oracle reads a candidate's limit here before each run; every
phase asks ``slot()`` before a run of its own (the state's run, a start's check, a fresh
check of the result, a comparison), which answers the run's time limit clipped to what
``--max-time`` leaves, or refuses a run that cannot end in time and keeps what it would
have needed (``would_buy``).  The reducer's phases tell it what they learn (the pace,
the original's run time, a reproducing candidate's, the calibration).  Nothing else
reads the clock to decide, counts tests or moves a deadline.

**The grace.**  ``--max-time`` bounds the whole command.  What may come after it is
``GRACE`` seconds: stopping the run that was going (every run's limit is clipped to the
end, and the worker kills its process group then), writing the result, the report and
the case file, removing the temporary directory.  Never a run: a run that cannot end
before the end is not started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from shrinkgpu.core import Budget
from shrinkgpu.worker.protocol import NOMINAL_STARTUP, startup_of

# Limits of one run, from the runs it is measured on (``calibrated_timeout``).
TIMEOUT_FACTOR = 10.0
TIMEOUT_FLOOR = 5.0
TIMEOUT_CEILING = 600.0
# A fresh run's limit before anything was measured (the first run of the original has
# none at all unless asked: see reducer/original.py).
DEFAULT_FRESH_TIMEOUT = 600.0
# Runs of about the original's length that extraction takes (the capture, the checks).
EXTRACT_RUNS = 2
# Seconds the command may take past --max-time: the running candidate stopped, the
# files written, the temporary directory removed (docs/outputs.md, *Time*).
GRACE = 5.0


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


def seconds(value: float) -> str:
    """Seconds in the words of a note: ``49 s``, ``0.4 s``."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


@dataclass(frozen=True)
class Slot:
    """What ``Limits.slot`` answers a phase about to start a run: its time limit, or
    (``timeout`` None) why it is not started, as the note says it."""

    timeout: float | None
    refused: str | None = None


class Limits(Budget):
    """``max_time``: seconds for the whole reduction from ``started`` (None: no bound);
    ``max_tests``: runs the search may charge, the runs a rebase makes included;
    ``timeout``: a candidate's limit the user gave (None: calibrated, then following
    the program candidates are cut from); ``verify_runs``: the fresh checks the search
    leaves time for; ``clock``: what time is read from (a fake one in tests)."""

    def __init__(self, *, started: float | None = None, max_time: float | None = None,
                 max_tests: int | None = None, timeout: float | None = None, verify_runs: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(max_tests=max_tests)
        self.clock = clock
        self.started = clock() if started is None else started
        self.max_time = max_time
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
        self.candidate_wall = 0.0  # the calibration's slowest run where candidates run
        self.result_wall = 0.0  # the newest reproducing candidate's run
        # The pace: seconds this machine's fresh interpreter took to import torch, as the
        # first run measured it (``paced``).  Decisions on how long a run is are taken in
        # units of it, so that a busy machine, which slows both, takes the same ones.
        self.startup = NOMINAL_STARTUP
        # (what, seconds it needs) of every run refused for want of time, in order
        self.refused: list[tuple[str, float]] = []

    # -- the clock ------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock()

    def left(self) -> float | None:
        """Seconds left of --max-time, which bounds the whole command (0 once past it)."""
        return None if self.end is None else max(0.0, self.end - self.clock())

    def out_of_time(self) -> bool:
        return self.end is not None and self.clock() >= self.end

    def elapsed(self) -> float:
        return self.clock() - self.started

    # -- a run a phase starts -----------------------------------------------------------------
    def slot(self, what: str, needs: float, limit: float) -> Slot:
        """A run of ``what`` (a noun: "the check of the replay") that takes about
        ``needs`` seconds and may take ``limit``: its time limit, ``limit`` clipped to
        what --max-time leaves; or refused, and kept for ``would_buy``, when what is left
        is less than it needs (it could not end in time: started, it would only hold the
        result back)."""
        left = self.left()
        if left is None:
            return Slot(limit)
        needs = max(needs, 0.0)
        if left <= 0.0 or left < needs:
            self.refused.append((what, needs))
            return Slot(None, f"{what} was not tried: {seconds(left)} left of --max-time, it takes {seconds(needs)}")
        return Slot(min(limit, left))

    def wait(self, usual: float) -> float:
        """Seconds to wait for what is no run of ours (collect_env, started with the
        reduction): ``usual``, or what --max-time leaves, and past its end a moment of the
        grace."""
        left = self.left()
        return usual if left is None else max(1.0, min(usual, left))

    def search_left(self) -> float | None:
        """Seconds left of the search's share (its deadline keeps the checks after it
        their time), never past --max-time; None when nothing bounds it."""
        ends = [t for t in (self.deadline, self.end) if t is not None]
        return None if not ends else max(0.0, min(ends) - self.clock())

    def affords(self, needs: float) -> bool:
        """Whether what is left of --max-time holds ``needs`` seconds (nothing refused)."""
        left = self.left()
        return left is None or (left > 0.0 and left >= needs)

    def would_buy(self) -> str | None:
        """What a larger --max-time would buy: each run refused, with the time it needs;
        None when none was."""
        if not self.refused:
            return None
        seen: dict[str, float] = {}
        for what, needs in self.refused:
            seen.setdefault(what, needs)
        items = "; ".join(f"{what} ({seconds(needs)})" for what, needs in seen.items())
        # (what the search itself needs is not known before it: its preparation is)
        more = ", the search more than its preparation" if any(w.startswith("the search") for w in seen) else ""
        return (f"--max-time {seconds(self.max_time or 0.0)} ended the reduction before {items}: a larger "
                f"--max-time buys each, for the time in parentheses{more}")

    # -- the pace ---------------------------------------------------------------------------
    def paced(self, startup: float | None) -> None:
        """The first run measured how long its fresh interpreter took to import torch: the
        unit run lengths are decided in (a run that could not measure it keeps the
        development machine's)."""
        if startup is not None:
            self.startup = startup_of(startup)

    def startups(self, wall: float) -> float:
        """``wall`` seconds in units of this machine's import of torch: a length a busy
        machine, which slows the run and the import alike, does not change."""
        return wall / self.startup

    # -- a candidate's limit ------------------------------------------------------------
    def calibrate(self, timeout: float, fresh_timeout: float, wall: float = 0.0) -> None:
        """The limits the calibration measured: a candidate's (unless the user gave one)
        and a fresh interpreter's; ``wall``: the slowest run it timed where candidates
        run (what a run of the search's start takes there)."""
        self.timeout = self.calibrated = timeout
        self.fresh_timeout = fresh_timeout
        self.candidate_wall = wall

    def follow(self, wall: float) -> float | None:
        """A candidate's limit follows the program it was cut from, not the original: one
        derived from a program that runs 2 s (its training loop cut, or started at the
        failing step) gets what that one takes, times the same margin, never more than
        the calibrated limit; a --timeout the user gave stays.  The new limit when it
        at least halves the current one, else None (no change).  A limit, not a path:
        it decides only which candidates time out, ten times past their parent's run."""
        if self.asked_timeout is not None:
            return None
        limit = min(self.calibrated, calibrated_timeout([wall]))
        if limit < self.timeout / 2:
            self.timeout = limit
            return limit
        return None

    def clip(self, limit: float) -> float:
        """``limit`` within what --max-time leaves (a run of a phase whose slot was
        granted for several runs: each ends by the end at the latest)."""
        left = self.left()
        return limit if left is None else max(0.1, min(limit, left))

    def fresh_limit(self, wall: float) -> float:
        """The limit of one more fresh run of a program that took ``wall``, within what
        --max-time leaves."""
        return self.clip(self.asked_timeout or calibrated_timeout([wall]))

    def run_limit(self) -> float:
        """A candidate's limit now: its own, and never past the search's share of
        --max-time (a run that starts near the end would otherwise hold the result back
        by a whole limit, and take the time kept for the checks after the search)."""
        left = self.search_left()
        return self.timeout if left is None else max(0.1, min(self.timeout, left))

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
        self.result_wall = wall
        if self.end is None:
            self.deadline = None
            return
        self.deadline = self.end - checks_reserve(self.verify_runs, self.original_wall, wall, self._import_seconds)

    def fresh_result(self) -> float:
        """About how long one fresh run of the newest result takes (a check after the
        search): what the search's deadline keeps for each."""
        original = self.original_wall or float("inf")
        return checks_reserve(1, original, self.result_wall, self._import_seconds)
