"""Program transformations, each a small pass registered in ``PASSES``.

A pass proposes units (``Edit``s) on a candidate, level by level, and builds the
candidate with some of them applied; the core decides which units to apply by testing.
Adding a pass: write a class with ``name``, ``units(cand, level)`` and ``apply`` (the
``EditPass`` base gives ``apply``), register it below, and add a before/after test in
tests/test_passes.py.  See docs/passes.md.
"""

from shrinkgpu.passes.base import EditPass
from shrinkgpu.passes.branches import HoistElse, HoistThen, TryToBody
from shrinkgpu.passes.definitions import DeleteDefinitions
from shrinkgpu.passes.files import DropFiles, InlineModules
from shrinkgpu.passes.statements import DeleteStatements, SliceToFailure

# Order within a sweep: cheap, large removals first; the driver repeats the sweep until
# nothing changes, so the order affects speed, not the result's minimality.
PASSES: tuple[EditPass, ...] = (
    SliceToFailure(),
    DeleteDefinitions(),
    DeleteStatements(),
    HoistThen(),
    HoistElse(),
    TryToBody(),
    InlineModules(),
    DropFiles(),
)

__all__ = [
    "PASSES",
    "DeleteDefinitions",
    "DeleteStatements",
    "DropFiles",
    "EditPass",
    "HoistElse",
    "HoistThen",
    "InlineModules",
    "SliceToFailure",
    "TryToBody",
]
