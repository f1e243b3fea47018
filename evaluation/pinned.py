"""``shrinkgpu`` with the thresholds that read the clock out of reach: for diffing a change
that must not change any result (a refactor), where two runs at different loads would
otherwise take different paths.

    PYTHONHASHSEED=0 python -m evaluation.pinned reduce SCRIPT -k REGEX --max-tests 200 --hash-seed 0 ...

The reducer decides some paths from the original's run: the loops where its time went
(``HOT_SHARE``, a share of the samples its first run took), a long original's saved
state and cut starts (``LONG_RUN``, its own time in units of its import of torch; before
issue 58 ``HOT_MIN_SECONDS`` and ``STATE_MIN_SECONDS``, seconds).  Since issue 58 both
are ratios a loaded machine does not move, but an original near a threshold still
crosses it between two versions that measure differently.  Here every threshold is set
beyond any run, in every module that reads it (the older names too, for ``--commit`` of
an older version), before the CLI starts; nothing else changes.  With a test budget
(``--max-tests``) and a fixed hash seed, two versions run this way write the same
result exactly when they decide alike (the 2026-12-05 journal: 34 of 34).

Not for measuring: a reduction without these paths is not what users get.
"""

from __future__ import annotations

import importlib
import sys

OUT_OF_REACH = 1e12
# (module, names): where the thresholds live, in the layouts before and after the
# reducer was split into phase modules
THRESHOLDS = (
    ("shrinkgpu.reducer.budget", ("HOT_MIN_SECONDS",)),
    ("shrinkgpu.reducer.facts", ("HOT_MIN_SECONDS", "HOT_SHARE")),
    ("shrinkgpu.reducer.search", ("HOT_MIN_SECONDS",)),
    ("shrinkgpu.reducer.session", ("HOT_MIN_SECONDS", "STATE_MIN_SECONDS")),
    ("shrinkgpu.reducer.state", ("STATE_MIN_SECONDS", "LONG_RUN")),
)


def pin() -> list[str]:
    """Set every threshold out of reach; the ``module.name``s set."""
    done = []
    for module, names in THRESHOLDS:
        try:
            m = importlib.import_module(module)
        except ImportError:
            continue
        for name in names:
            if hasattr(m, name):
                setattr(m, name, OUT_OF_REACH)
                done.append(f"{module}.{name}")
    return done


def main(argv: list[str] | None = None) -> None:
    pin()
    from shrinkgpu.cli import main as cli

    sys.argv = ["shrinkgpu", *(sys.argv[1:] if argv is None else argv)]
    cli()


if __name__ == "__main__":
    main()
