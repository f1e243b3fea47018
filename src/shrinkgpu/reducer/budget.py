"""Where the time goes: what the search leaves under --max-time for the checks after it,
and which loops of a slow original it cuts first."""

from __future__ import annotations

from typing import Mapping

# Runs of about the original's length that extraction takes (the capture, the checks).
EXTRACT_RUNS = 2
# Loops are counted again at a rebase only while a run of the program takes at most this.
RECOUNT_MAX_SECONDS = 5.0
# The search starts with loops that took this share of an original's run, when the run
# took at least HOT_MIN_SECONDS (below that, order hardly matters).
HOT_SHARE = 0.25
HOT_MIN_SECONDS = 1.0


def checks_reserve(verify_runs: int, extracting: bool, original_wall: float, result_wall: float,
                   import_seconds: float) -> float:
    """Seconds the search leaves under --max-time for what follows it: verifying runs the
    result ``verify_runs`` times in fresh interpreters; extracting runs the original once
    to save the call, then checks the extracted script (about one run of the result).
    The result's time falls as it shrinks (a training loop cut), so the reducer asks
    again at every reproducing candidate; the original's does not.  ``result_wall`` is
    a forked run's, which lacks a fresh interpreter's imports (``import_seconds``, the
    preload's time)."""
    fresh_result = min(original_wall, result_wall + import_seconds) + 0.5
    reserve = verify_runs * fresh_result
    if extracting:
        reserve += (original_wall + 0.5) + (EXTRACT_RUNS - 1) * fresh_result
    return reserve


def hot_loops(files: Mapping[str, str], loop_time) -> tuple[tuple[str, str, float], ...]:
    """(file, header text, share) of the loops that took at least HOT_SHARE of the run."""
    out = []
    for file, line, share in loop_time:
        lines = files.get(file, "").splitlines()
        if share >= HOT_SHARE and 1 <= line <= len(lines):
            out.append((file, lines[line - 1].strip(), share))
    return tuple(out)
