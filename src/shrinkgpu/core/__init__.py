"""The search core: pure delta debugging.  Imports nothing of shrinkgpu but itself, and
knows nothing of programs, processes or torch -- only ``test(candidate) -> Verdict``."""

from shrinkgpu.core.ddmin import ddmin
from shrinkgpu.core.probdd import probdd
from shrinkgpu.core.rates import RateTest, describe_rate
from shrinkgpu.core.search import (
    DEFAULT_SEARCH,
    Budget,
    Improved,
    Outcome,
    Pass,
    PassStarted,
    ReductionStopped,
    Tested,
    reduce_to_fixpoint,
)
from shrinkgpu.core.verdict import Verdict

__all__ = [
    "Budget",
    "DEFAULT_SEARCH",
    "Improved",
    "Outcome",
    "Pass",
    "PassStarted",
    "RateTest",
    "ReductionStopped",
    "Tested",
    "Verdict",
    "ddmin",
    "describe_rate",
    "probdd",
    "reduce_to_fixpoint",
]
