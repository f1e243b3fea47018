"""``shrinkgpu`` with the thresholds that read the clock out of reach: for diffing a change
that must not change any result (a refactor), where two runs at different loads would
otherwise take different paths.

    PYTHONHASHSEED=0 python -m evaluation.pinned reduce SCRIPT -k REGEX --max-tests 200 --hash-seed 0 ...

The reducer decides some paths from the original's run time: the loops where its time
went (``HOT_MIN_SECONDS``, a share of a run of at least 1 s), a long original's saved
state and cut starts (``STATE_MIN_SECONDS``, 10 s).  An original near a threshold crosses
it under one load and not under another, and the two reductions part ways without any
change of code being the cause.  Here both thresholds are set beyond any run, in every
module that reads them, before the CLI starts; nothing else changes.  With a test budget
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
    ("shrinkgpu.reducer.facts", ("HOT_MIN_SECONDS",)),
    ("shrinkgpu.reducer.search", ("HOT_MIN_SECONDS",)),
    ("shrinkgpu.reducer.session", ("HOT_MIN_SECONDS", "STATE_MIN_SECONDS")),
    ("shrinkgpu.reducer.state", ("STATE_MIN_SECONDS",)),
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
