"""external (passes/external.py, ``--propose-with``): each proposal a unit of the edits the
package has, the exact program after it, and the proposals that are no unit."""

from __future__ import annotations

from shrinkgpu.core import Verdict, reduce_to_fixpoint
from shrinkgpu.passes.external import ExternalProposals, Proposal, proposal_unit
from shrinkgpu.syntax import Facts

from .helpers import dedent, line_of, start

SRC = dedent(
    """\
    import torch
    import os

    # the data
    x = torch.ones(3)
    w = torch.ones(4)


    def f(a):
        b = a + 1
        return b


    print(f(x))
    y = torch.nn.functional.linear(x, w)
    """
)


def propose(*texts, **files):
    """A proposer that answers every program with ``texts`` for the main file (and
    ``files`` as whole proposals)."""
    asked = []

    def proposer(program, main):
        asked.append((dict(program), main))
        out = [Proposal({main: t}) for t in texts]
        out += [Proposal(f) for f in files.values()]
        return out

    proposer.asked = asked
    return proposer


def applied(cand, proposal: Proposal) -> str:
    return cand.with_edits(proposal_unit(cand, proposal)).files["a.py"]


def test_a_deleted_line_is_a_delete_and_the_program_after_it_is_the_proposal():
    cand = start(SRC)
    proposed = SRC.replace("import os\n", "")
    unit = proposal_unit(cand, Proposal({"a.py": proposed}))
    assert [e.op for e in unit] == ["delete"]
    assert applied(cand, Proposal({"a.py": proposed})) == proposed


def test_a_rewritten_function_is_one_replace():
    cand = start(SRC)
    proposed = SRC.replace("    b = a + 1\n    return b\n", "    return a + 1\n")
    unit = proposal_unit(cand, Proposal({"a.py": proposed}))
    assert [(e.op, e.text) for e in unit] == [("replace", "def f(a):\n    return a + 1\n")]
    assert applied(cand, Proposal({"a.py": proposed})) == proposed


def test_added_statements_go_in_with_their_neighbour():
    cand = start(SRC)
    proposed = SRC.replace("print(f(x))\n", "x = x[:2]\nprint(f(x))\n")
    assert applied(cand, Proposal({"a.py": proposed})) == proposed
    on_top = "from __future__ import annotations\n" + SRC
    assert applied(cand, Proposal({"a.py": on_top})) == on_top


def test_a_whole_new_program_keeps_the_comment_lines_above_the_first_statement_it_replaced():
    cand = start(SRC)
    proposed = "import torch\ntorch.nn.functional.linear(torch.ones(3), torch.ones(4))\n"
    assert applied(cand, Proposal({"a.py": proposed})) == proposed


def test_what_is_no_unit():
    cand = start(SRC, helpers="def g():\n    return 1\n")
    assert proposal_unit(cand, Proposal({"a.py": SRC})) == ()  # nothing changed
    assert proposal_unit(cand, Proposal({"a.py": "def (:\n"})) == ()  # does not parse
    assert proposal_unit(cand, Proposal({"other.py": "x = 1\n"})) == ()  # not a file of the program
    assert proposal_unit(cand, Proposal({"a.py": None})) == ()  # the main file left out
    assert [e.op for e in proposal_unit(cand, Proposal({"helpers.py": None}))] == ["drop"]


def test_a_proposal_that_loses_the_seeding_is_no_unit():
    seeded = "import torch\ntorch.manual_seed(0)\nx = torch.randn(3)\nx[5]\n"
    cand = start(seeded, Facts(seed_sites=(("a.py", line_of(seeded, "torch.manual_seed"), True),)))
    assert proposal_unit(cand, Proposal({"a.py": seeded.replace("torch.manual_seed(0)\n", "")})) == ()
    assert proposal_unit(cand, Proposal({"a.py": seeded.replace("x = torch.randn(3)\n", "x = torch.zeros(3)\n")}))


def test_the_pass_asks_once_per_sweep_on_the_rebased_program_only():
    cand = start(SRC)
    proposer = propose(SRC.replace("import os\n", ""), SRC.replace("print(f(x))\n", ""), SRC)
    external = ExternalProposals(proposer)
    units = external.units(cand, 0)
    assert len(units) == 2  # the unchanged proposal is no unit
    assert external.units(cand, 1) is None
    assert proposer.asked == [({"a.py": SRC}, "a.py")]
    # a candidate that carries edits waits for the rebase
    assert external.units(cand.with_edits(units[0]), 0) == []
    assert [external.unit_size(cand, u) for u in units] == [2, 7]


def test_proposals_are_judged_and_merged_by_the_search():
    """Two proposals that each cut a statement merge; a third that breaks the bug is
    judged like any candidate and left out."""
    cand = start(SRC)
    proposer = propose(SRC.replace("import os\n", ""), SRC.replace("print(f(x))\n", ""),
                       SRC.replace("y = torch.nn.functional.linear(x, w)\n", ""))

    def test(c):
        return Verdict.REPRODUCED if "linear(x, w)" in c.files["a.py"] else Verdict.PASSED

    outcome = reduce_to_fixpoint(cand, [ExternalProposals(proposer)], test, lambda c: c.size,
                                 normalize=lambda c: c.program.__class__(c.files, "a.py").initial())
    text = outcome.best.files["a.py"]
    assert "import os" not in text and "print(f(x))" not in text
    assert "linear(x, w)" in text
