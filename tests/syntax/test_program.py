"""The program representation (syntax/program.py): an immutable libcst original, its
statement table, and candidates as sets of edits (what is live, at what depth, which
files, how big).

No processes and no torch: programs mention torch only in their text.
"""

from __future__ import annotations

import pytest

from shrinkgpu.syntax import Edit, Facts, Program, count_tokens
from shrinkgpu.syntax.program import FILE_COST, inline_candidates
from shrinkgpu.syntax.tokens import measure

from .helpers import DATA, HELPERS, IF_CHAIN, MAIN, call_in, edited, program, sid, text

# --------------------------------------------------------------------------------------
# The original: its statement table, protected statements, node indices
# --------------------------------------------------------------------------------------

def test_statement_table_records_kind_parent_branch_and_depth():
    p = program(
        """\
        import torch
        if a:
            b = 1
        elif c:
            d = 2
        else:
            e = 3
        try:
            f = 4
        except E:
            g = 5
        finally:
            h = 6
        def fn():
            with ctx():
                return 7
        """
    )
    table = [(s.kind, s.parent, s.branch, s.depth) for s in p.stmts]
    assert table == [
        ("simple", None, None, 0),  # 0 import torch
        ("if", None, None, 0),  # 1
        ("simple", 1, "body", 1),  # 2 b = 1
        ("elif", 1, "orelse", 1),  # 3 elif c
        ("simple", 3, "body", 2),  # 4 d = 2
        ("simple", 3, "orelse", 2),  # 5 e = 3
        ("try", None, None, 0),  # 6
        ("simple", 6, "body", 1),  # 7 f = 4
        ("simple", 6, "handlers", 1),  # 8 g = 5
        ("simple", 6, "finalbody", 1),  # 9 h = 6
        ("def", None, None, 0),  # 10
        ("with", 10, "body", 1),  # 11
        ("simple", 11, "body", 2),  # 12 return 7
    ]
    assert p.children[None] == [0, 1, 6, 10]
    assert p.children[1] == [2, 3]
    assert p.stmts[0].size == 2  # ``import torch``: two tokens


def test_a_program_that_does_not_parse_is_a_syntax_error():
    with pytest.raises(SyntaxError, match="a.py"):
        Program({"a.py": "def broken(:\n"}, "a.py")


def test_the_main_file_must_be_one_of_the_files():
    with pytest.raises(ValueError, match="main.py"):
        Program({"a.py": "x = 1\n"}, "main.py")


def test_protected_and_seeding_statements_come_from_seed_sites():
    src = """\
    import torch


    def seed_all(seed):
        torch.manual_seed(seed)


    def main():
        seed_all(0)
        x = torch.randn(3)


    main()
    """
    facts = Facts(seed_sites=(("a.py", 13, False), ("a.py", 9, False), ("a.py", 5, True), ("a.py", 99, False)))
    p = program(src, facts)
    assert p.protected == {sid(p, "main()"), sid(p, "seed_all(0)"), sid(p, "torch.manual_seed")}
    assert p.seeding == {sid(p, "torch.manual_seed")}
    assert program(src).protected == frozenset()


def test_node_index_is_stable_for_one_node():
    p = program(DATA)
    call = call_in(p, "y = f(")
    assert p.node_index(call) == p.node_index(call)
    assert p.node_index(call) != p.node_index(call.args[0])


# --------------------------------------------------------------------------------------
# Candidates: edits, live statements, depth
# --------------------------------------------------------------------------------------

def test_depth_of_a_statement_in_an_elif_branch_is_its_rendered_depth():
    p = program(IF_CHAIN)
    c = p.initial()
    assert c.depth(sid(p, 'dev = "cuda"')) == 1
    assert c.depth(sid(p, 'dev = "mps"')) == 1
    assert c.depth(sid(p, 'dev = "cpu"')) == 1


def test_a_newer_replace_supersedes_an_older_one_for_the_same_statement():
    p = program(DATA)
    c = p.initial().with_edits([Edit("replace", 1, text="x = 1\n")]).with_edits([Edit("replace", 1, text="x = 2\n")])
    assert c.edits == {Edit("replace", 1, text="x = 2\n")}
    assert "x = 2\ny = f" in text(c)


def test_with_edits_of_nothing_is_the_same_candidate():
    c = program(DATA).initial()
    assert c.with_edits([]) is c


# --------------------------------------------------------------------------------------
# inline and drop: local modules
# --------------------------------------------------------------------------------------

def test_inline_of_a_deleted_import_does_not_drop_the_module():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("inline", 1, "helpers.py"), Edit("delete", 1))
    assert sorted(c.files) == ["a.py", "helpers.py"]
    assert c.files["helpers.py"] == HELPERS
    assert c.dropped_files == frozenset()


def test_inline_candidates_are_live_imports_of_local_modules():
    p = program(MAIN + "import os\nfrom pkg.sub import thing\nimport pkg.sub\n", helpers=HELPERS,
                **{"pkg/sub": "thing = 1\n"})
    c = p.initial()
    found = [(s.id, path) for s, path in inline_candidates(c)]
    assert found == [(1, "helpers.py"), (2, "helpers.py"), (6, "pkg/sub.py")]  # not ``import pkg.sub``
    assert inline_candidates(c.with_edits([Edit("drop", file="helpers.py")])) == [(p.stmts[6], "pkg/sub.py")]


def test_drop_leaves_a_file_out_and_its_statements_out_of_the_live_set():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("drop", file="helpers.py"))
    assert c.files == {"a.py": MAIN}
    assert c.live == frozenset(p.stmts_in_file("a.py"))
    assert c.dropped_files == {"helpers.py"}


def test_local_module_names_cover_packages():
    p = Program({"a.py": "", "m.py": "", "pkg/__init__.py": "", "pkg/mod.py": ""}, "a.py")
    assert p.local_module_names() == {"m": "m.py", "pkg": "pkg/__init__.py", "pkg.mod": "pkg/mod.py"}


# --------------------------------------------------------------------------------------
# Size and identity
# --------------------------------------------------------------------------------------

def test_size_counts_tokens_not_comments_or_blank_lines():
    p = program("x = 1  # a long comment that costs nothing\n\n\ny = f(x)\n")
    assert p.initial().size == 3 + 6
    assert edited(p, Edit("delete", 0)).size == 6


def test_key_identifies_the_rendered_text():
    p = program("x = 1\ny = 2\n")
    a = edited(p, Edit("delete", 0))
    b = edited(p, Edit("replace", 0, text=""))
    assert a.edits != b.edits and a.key == b.key == (("a.py", "y = 2\n"),)


def test_order_is_tokens_plus_block_and_loop_costs_then_the_magnitude_of_constants():
    src = "for i in range(30):\n    xs = [j for j in range(4)]\n    while i:\n        i -= 1  # comment\n"
    # tokens, indented blocks, loops (not the comprehension's ``for``), integer literals
    assert measure(src) == (26, 2, 2, 35)
    cand = program(src).initial()
    assert cand.order == (26 + 5 * 2 + 10 * 2, 35)
    straight = program("i = 0\nxs = [j for j in range(4)]\ni -= 1\n").initial()
    assert straight.order < cand.order


def test_a_file_the_program_loads_counts_as_a_file_and_what_it_carries():
    from shrinkgpu.syntax import CutRecord, SavedObject
    from shrinkgpu.syntax.facts import LOADED_COST_MAX

    # the four numbers written out against a load of their pickle: the load costs the
    # file and the tokens of the numbers it stands for, so it is never the smaller one
    written = program("f(torch.tensor([1, 9, 3, 9]))\n").initial()
    load = ("_call = torch.load(pathlib.Path(__file__).with_name('a.call.pt'))\n"
            "f(*_call['args'])\n")
    cut = CutRecord("a.py", "g()", load, loads="a.call.pt", cost=written.size)
    loading = program(load, Facts(cut=cut)).initial()
    assert loading.order[0] == loading.size + FILE_COST + written.size
    assert written.order < loading.order
    # a file no longer named costs nothing; a data object by its bytes, up to a bound
    assert program("f(1)\n", Facts(cut=cut)).initial().order[0] == 4
    dataset = SavedObject("ds", "Clips", "a.min.ds.pkl", 40 * 1024 + 1)
    text = "ds = pickle.loads(p.with_name('a.min.ds.pkl').read_bytes())\n"
    assert program(text, Facts(saved_objects=(dataset,))).initial().order[0] == count_tokens(text) + FILE_COST + 41
    huge = SavedObject("ds", "Clips", "a.min.ds.pkl", 2**30)
    assert program(text, Facts(saved_objects=(huge,))).initial().order[0] == (
        count_tokens(text) + FILE_COST + LOADED_COST_MAX)


def test_the_statement_that_enters_a_framework_costs_its_loops_while_it_stays():
    from shrinkgpu.syntax import CutRecord
    from shrinkgpu.syntax.program import FRAMEWORK_COST

    cut = CutRecord("a.py", "trainer.fit(model)", "model.training_step(x, 0)\n")
    text = "trainer = Trainer()\ntrainer.fit(model)\n"
    assert program(text, Facts(cut=cut)).initial().order[0] == count_tokens(text) + FRAMEWORK_COST
    # the direct call in its place: no framework left to charge
    direct = "model.training_step(x, 0)\n"
    assert program(direct, Facts(cut=cut)).initial().order[0] == count_tokens(direct)


def test_a_statements_scope_is_named_as_python_names_its_code():
    import textwrap

    from shrinkgpu.syntax.queries import qualname_of

    program = Program({"a.py": textwrap.dedent("""\
        top = 1


        class Net:
            size = 2

            def forward(self, x):
                y = x

                def inner():
                    z = y
                    return z

                return inner()


        def main():
            class Local:
                pass

            n = 3
        """)}, "a.py")
    names = {program.stmt_code(s.id).strip().splitlines()[0]: qualname_of(program, s.id) for s in program.stmts}
    assert names["top = 1"] == "<module>"
    assert names["size = 2"] == "Net"
    assert names["y = x"] == "Net.forward"
    assert names["z = y"] == "Net.forward.<locals>.inner"
    assert names["n = 3"] == "main"
    assert names["pass"] == "main.<locals>.Local"
