"""What a run showed (syntax/facts.py), as the program reads it."""

from __future__ import annotations

from passes.test_loops import LOOPS_SRC  # the nested loops loop-to-failing-iteration cuts
from shrinkgpu.syntax import Facts
from shrinkgpu.syntax.facts import loop_facts

from .helpers import program


def test_loop_facts_name_loops_by_header_text_and_skip_ambiguous_ones():
    files = {"a.py": LOOPS_SRC}
    facts = loop_facts(files, [("a.py", 5, 1), ("a.py", 7, 4), ("b.py", 1, 2)])
    assert facts == (("a.py", "for epoch in range(1, 3):", 1), ("a.py", "for y in data:", 4))
    twice = LOOPS_SRC + "for y in data:\n    pass\n"
    p = program(twice, Facts(loops=facts))
    assert {p.stmt_code(s).strip().splitlines()[0]: k for s, k in p.loop_iterations.items()} == {
        "for epoch in range(1, 3):": 1  # "for y in data:" occurs twice now
    }
