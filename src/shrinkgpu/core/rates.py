"""Is a flaky candidate as good as the original?  A sequential test on reproduction rates.

A script that fails one run in two cannot be judged by one run: a candidate that lost
the trigger half the time looks the same as the original after a lucky run.  Wald's
sequential probability ratio test decides between "reproduces at the original's rate
``p0``" and "meaningfully less often" (``p1 = p0 * LOWER``) from one run at a time, and
stops as soon as the evidence is strong enough either way, so a good candidate of a bug
that fails 9 runs in 10 costs a handful of runs, not a fixed sample.

Pure arithmetic: no processes, no programs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# "Meaningfully lower" is half the original's rate.
LOWER = 0.5
ALPHA = 0.05  # chance of rejecting a candidate that reproduces as often as the original
BETA = 0.05  # chance of accepting one that reproduces at half the rate or less
MAX_RUNS = 24  # undecided after this many runs: the observed rate decides


@dataclass
class RateTest:
    """One candidate's sequential test; feed it ``add(reproduced)`` until ``decided``."""

    p0: float
    lower: float = LOWER
    alpha: float = ALPHA
    beta: float = BETA
    max_runs: int = MAX_RUNS
    runs: int = 0
    reproduced: int = 0
    _llr: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.p0 <= 1.0:
            raise ValueError(f"the original's rate must be in (0, 1], got {self.p0}")
        self.p1 = self.p0 * self.lower
        self._accept_at = math.log(self.beta / (1.0 - self.alpha))  # LLR at or below: as good
        self._reject_at = math.log((1.0 - self.beta) / self.alpha)  # LLR at or above: worse

    def add(self, reproduced: bool) -> None:
        self.runs += 1
        if reproduced:
            self.reproduced += 1
            self._llr += math.log(self.p1 / self.p0)
        elif self.p0 >= 1.0:
            self._llr = math.inf  # the original never failed to reproduce: one miss decides
        else:
            self._llr += math.log((1.0 - self.p1) / (1.0 - self.p0))

    @property
    def decided(self) -> bool:
        return self.accepted is not None

    @property
    def accepted(self) -> bool | None:
        """True: as good as the original; False: meaningfully worse; None: run again."""
        if self._llr <= self._accept_at:
            return True
        if self._llr >= self._reject_at:
            return False
        if self.runs >= self.max_runs:
            return self.reproduced / self.runs >= (self.p0 + self.p1) / 2
        return None

    @classmethod
    def judge(cls, p0: float, reproduced: int, runs: int) -> bool:
        """The test's decision on runs already made (``runs`` of which ``reproduced``)."""
        test = cls(p0)
        for k in range(runs):
            test.add(k < reproduced)
        return bool(test.accepted) if test.decided else reproduced / max(1, runs) >= (test.p0 + test.p1) / 2

    @property
    def rate(self) -> float:
        return self.reproduced / self.runs if self.runs else 0.0


def describe_rate(reproduced: int, runs: int) -> str:
    return f"{reproduced} of {runs} runs ({100 * reproduced / runs:.0f}%)" if runs else "no runs"
