"""passes/base.py: what every pass is built on: units as groups of edits, level zero,
a deletion that takes along what would be left reading a name nothing binds, and never
a seeding call."""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, dedupe, deletion_unit, lone_assignment, names_read
from shrinkgpu.syntax import Edit, Facts

from .helpers import dedent, line_of, start

SEEDED = dedent("""\
    import torch
    seed = 1
    torch.manual_seed(seed)
    data = [1, 2]
    total = sum(data)
    explode(total)
    """)


def sid(cand, code: str) -> int:
    [found] = [s.id for s in cand.program.stmts if cand.program.stmt_code(s.id).strip().startswith(code)]
    return found


class DeleteEachLine(LevelZeroPass):
    name = "delete-each-line"

    def edits(self, cand):
        return [(Edit("delete", s.id),) for s in cand.editable()] * 2  # every unit twice


def test_a_level_zero_pass_proposes_each_unit_once_at_level_zero_only():
    cand = start("x = 1\ny = 2\n")
    p = DeleteEachLine()
    assert p.units(cand, 0) == [(Edit("delete", 0),), (Edit("delete", 1),)]
    assert p.units(cand, 1) is None
    assert p.apply(cand, p.units(cand, 0)[:1]).files["a.py"] == "y = 2\n"
    assert dedupe([(Edit("delete", 1),), (), (Edit("delete", 1),)]) == [(Edit("delete", 1),)]


def test_a_deletion_takes_along_what_reads_only_what_it_deletes_and_never_a_seeding_call():
    cand = start(SEEDED, Facts(seed_sites=(("a.py", line_of(SEEDED, "torch.manual_seed"), True),)))
    # ``data`` goes with ``total``, and ``explode(total)`` with it: nothing else reads them
    assert deletion_unit(cand, {sid(cand, "data = [1, 2]")}) == (
        Edit("delete", sid(cand, "data = [1, 2]")), Edit("delete", sid(cand, "total = sum")),
        Edit("delete", sid(cand, "explode(total)")))
    # ``seed`` is read by the seeding call: deleting it would lose the call, so no unit
    assert deletion_unit(cand, {sid(cand, "seed = 1")}) == ()


def test_names_read_are_every_identifier_even_of_code_that_does_not_tokenize():
    assert names_read("y = f(x.fc, seed=s)  # not_a_name") == {"y", "f", "x", "fc", "seed", "s"}
    assert names_read("") == set()
    assert names_read("if a:\n  b\n c\n") == {"if", "a", "b", "c"}  # mixed indentation: every word


def test_a_lone_assignment_is_one_target_on_a_line_of_its_own():
    assert lone_assignment(cst.parse_statement("self.rows = []\n")) is not None
    for text in ("a = b = 1\n", "x = 1; y = 2\n", "x += 1\n", "def f():\n    pass\n"):
        assert lone_assignment(cst.parse_statement(text)) is None, text
