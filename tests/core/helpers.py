"""In-process oracles for the search core: no processes, no torch."""

from __future__ import annotations

from shrinkgpu.core import Verdict

R, P = Verdict.REPRODUCED, Verdict.PASSED


def needs(required):
    """The monotone oracle: a kept list reproduces when it holds every item of ``required``."""
    required = set(required)
    return lambda kept: R if required <= set(kept) else P
