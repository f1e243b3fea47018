"""split-assignments (passes/assignments.py): one assignment per target."""

from __future__ import annotations

from shrinkgpu.passes import SplitAssignments

from .helpers import after, dedent, start


def test_split_assignments_one_statement_per_target():
    cand = start("""\
        class T:
            def __init__(self, model, cfg):
                self.model, self.cfg = model, cfg
        a, b = 1, 2
        a, b = b, a
        x, *rest = 1, 2, 3
        p, q = pair
        """)
    assert after(SplitAssignments(), cand) == dedent("""\
        class T:
            def __init__(self, model, cfg):
                self.model = model
                self.cfg = cfg
        a = 1
        b = 2
        a, b = b, a
        x, *rest = 1, 2, 3
        p, q = pair
        """)
