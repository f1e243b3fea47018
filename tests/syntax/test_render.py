"""Rendering a candidate (syntax/render.py): the original trees walked with its edits
applied.

Every expectation is the exact text a candidate renders to, so a change in what
survives an edit (a comment, a blank line, an ``else:``) shows up as a failing diff.
No processes and no torch: programs mention torch only in their text.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.syntax import Edit, Program

from .helpers import DATA, HELPERS, IF_CHAIN, MAIN, call_in, editable_ids, edited, own_text, program, sid, text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


# --------------------------------------------------------------------------------------
# No edits: the original, byte for byte
# --------------------------------------------------------------------------------------

ODD_FORMATTING = (
    "#!/usr/bin/env python\n"
    "# -*- coding: utf-8 -*-\n"
    '"""Docstring."""\n'
    "import torch   # trailing spaces before the comment\n"
    "\n"
    "\n"
    "x = torch.randn( 3,4 )  ;  y = x\n"
    "if x.sum() > 0 :   # odd spacing\n"
    "    z = (  x\n"
    "          + 1 )\n"
    "else: z = 0\n"
    "w = [1 ,2,\n"
    "\t3]   \n"
    "def f( a ,b = 2 ) :\n"
    "        return a\n"
    "\n"
    "# a comment at the end, no newline after it"
)


def test_no_edits_renders_the_original_byte_for_byte():
    p = Program({"a.py": ODD_FORMATTING}, "a.py")
    assert p.initial().files == {"a.py": ODD_FORMATTING}


def test_no_edits_keeps_crlf_line_endings():
    src = "import torch\r\n\r\nx = 1  # one\r\nif x:\r\n    y = 2\r\n"
    assert Program({"a.py": src}, "a.py").initial().files == {"a.py": src}


def _fixture_files() -> list[Path]:
    # Not ``train.min.py`` and the like: what running the README's command left behind.
    return sorted(p for p in FIXTURES.glob("*/*.py") if not p.name.endswith(".min.py"))


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_edits_renders_every_fixture_script_unchanged(path: Path):
    src = path.read_text(encoding="utf-8")
    cand = Program({path.name: src}, path.name).initial()
    assert cand.files == {path.name: src}
    assert cand.live == frozenset(range(len(cand.program.stmts)))


def test_no_edits_renders_a_multi_file_fixture_unchanged():
    folder = FIXTURES / "multifile"
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")) if p.name != "ideal_cut.py"}
    p = Program(files, "train.py")
    assert p.initial().files == files
    assert p.local_module_names() == {"heads": "heads.py"}


# A small-program generator: simple lines, comments and blank lines, nested blocks.
SIMPLE_LINES = (
    "x = 1",
    "y = f(x, 2)  # a call",
    "z = [1,\n     2]",
    "a, b = b, a",
    "print('hi')",
    "import os",
    "from m import (\n    n,\n)",
    "del q",
    "t = x if y else z",
    "s = 1; u = 2",
)


def _simple():
    return st.sampled_from(SIMPLE_LINES)


def _compound(children):
    return st.tuples(
        st.sampled_from(("if", "if-else", "if-elif", "for", "while", "with", "try", "try-finally", "def", "class")),
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=2),
    )


_TREES = st.lists(st.recursive(_simple(), _compound, max_leaves=12), min_size=1, max_size=6)


_GAPS = st.sampled_from(("", "\n", "# note\n", "\n\n# section\n"))


def _render_tree(nodes, gaps, depth: int = 0) -> str:
    pad = "    " * depth
    out = []
    for i, node in enumerate(nodes):
        out.append(textwrap.indent(gaps[i % len(gaps)], pad) if gaps else "")
        if isinstance(node, str):
            out.append(textwrap.indent(node + "\n", pad))
            continue
        kind, body, other = node
        inner = _render_tree(body, gaps, depth + 1)
        second = _render_tree(other, gaps, depth + 1)
        header = {
            "if": "if c:", "if-else": "if c:", "if-elif": "if c:", "for": "for i in r:",
            "while": "while w:", "with": "with ctx() as v:", "try": "try:", "try-finally": "try:",
            "def": "def fn(p, q=1):", "class": "class K(Base):",
        }[kind]
        out.append(f"{pad}{header}  # {kind}\n{inner}")
        if kind == "if-else":
            out.append(f"{pad}else:\n{second}")
        elif kind == "if-elif":
            out.append(f"{pad}elif d:\n{second}{pad}else:\n{second}")
        elif kind == "try":
            out.append(f"{pad}except ValueError as e:\n{second}{pad}else:\n{second}")
        elif kind == "try-finally":
            out.append(f"{pad}finally:\n{second}")
    return "".join(out)


@settings(max_examples=60, deadline=None)
@given(_TREES, st.lists(_GAPS, min_size=1, max_size=4))
def test_no_edits_round_trips_generated_programs(trees, gaps):
    src = _render_tree(trees, gaps)
    compile(src, "a.py", "exec")
    p = Program({"a.py": src}, "a.py")
    assert p.initial().files["a.py"] == src


@settings(max_examples=60, deadline=None)
@given(_TREES, st.lists(_GAPS, min_size=1, max_size=4), st.data())
def test_any_set_of_deletions_renders_code_that_compiles(trees, gaps, data):
    src = _render_tree(trees, gaps)
    p = Program({"a.py": src}, "a.py")
    gone = data.draw(st.sets(st.sampled_from(range(len(p.stmts)))))
    cand = p.initial().with_edits(Edit("delete", i) for i in gone)
    compile(cand.files["a.py"], "a.py", "exec")  # emptied blocks got ``pass``

    def dead(i):
        while i is not None:
            if i in gone:
                return True
            i = p.stmts[i].parent
        return False

    assert cand.live == frozenset(s.id for s in p.stmts if not dead(s.id))
    assert editable_ids(cand) == [s.id for s in p.stmts if not dead(s.id)]
    # Every surviving simple statement is still there, with its own text, in order.
    out = iter(cand.files["a.py"].splitlines())
    for s in p.stmts:
        if s.kind == "simple" and not dead(s.id):
            first = own_text(p, s).splitlines()[0].strip()
            assert any(line.strip() == first for line in out), first


@settings(max_examples=60, deadline=None)
@given(_TREES, st.lists(_GAPS, min_size=1, max_size=4), st.data())
def test_any_mix_of_structural_edits_renders_code_that_compiles(trees, gaps, data):
    src = _render_tree(trees, gaps)
    p = Program({"a.py": src}, "a.py")
    edits = []
    for s in p.stmts:
        ops = [None, "delete"]
        ops += ["body"] if s.kind in ("if", "elif", "try", "with") else []
        ops += ["else"] if s.kind in ("if", "elif") else []
        op = data.draw(st.sampled_from(ops))
        if op is not None:
            edits.append(Edit(op, s.id))
    cand = p.initial().with_edits(edits)
    compile(cand.files["a.py"], "a.py", "exec")
    out = iter(cand.files["a.py"].splitlines())
    for s in p.stmts:
        if s.kind == "simple" and s.id in cand.live:
            first = own_text(p, s).splitlines()[0].strip()
            assert any(line.strip() == first for line in out), first


@pytest.mark.parametrize(
    "path",
    [p for p in _fixture_files() if p.name != "ideal_cut.py"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_deleting_one_top_level_statement_of_a_fixture_is_libcsts_own_rendering(path: Path):
    # The reference is libcst generating the module without that statement: the
    # renderer may take shortcuts (reusing unchanged text), never change the result.
    src = path.read_text(encoding="utf-8")
    p = Program({path.name: src}, path.name)
    module = p.modules[path.name]
    for top in p.children[None]:
        cand = p.initial().with_edits([Edit("delete", top)])
        expected = module.with_changes(body=[s for s in module.body if s is not p.stmts[top].node]).code
        assert cand.files[path.name] == expected, top


# --------------------------------------------------------------------------------------
# delete
# --------------------------------------------------------------------------------------

def test_delete_removes_the_statement_and_its_own_leading_comment():
    p = program(
        """\
        import torch  # top

        # the data
        x = torch.randn(3, 4)  # inputs
        y = x.sum()  # total
        """
    )
    c = edited(p, Edit("delete", sid(p, "x = torch")))
    assert text(c) == "import torch  # top\ny = x.sum()  # total\n"
    assert c.live == {0, 2}
    assert editable_ids(c) == [0, 2]


def test_delete_of_every_statement_in_a_block_leaves_pass():
    p = program(
        """\
        for i in range(3):
            a = i  # one
            b = i
        print(i)
        """
    )
    c = edited(p, Edit("delete", sid(p, "a = i")), Edit("delete", sid(p, "b = i")))
    assert text(c) == "for i in range(3):\n    pass\nprint(i)\n"
    assert c.live == {0, 3}
    assert c.depth(3) == 0


def test_delete_of_a_compound_statement_takes_its_children_out_of_the_live_set():
    p = program(
        """\
        if a:
            b = 1
            if c:
                d = 2
        e = 3
        """
    )
    c = edited(p, Edit("delete", 0))
    assert text(c) == "e = 3\n"
    assert c.live == {4}
    assert editable_ids(c) == [4]


def test_emptied_else_and_finally_parts_disappear():
    p = program(
        """\
        if a:
            b = 1
        else:
            b = 2
        try:
            c = 1
        except E:
            c = 2
        else:
            c = 3
        finally:
            c = 4
        for i in r:
            e = i
        else:
            e = 0
        while w:
            f = 1
        else:
            f = 2
        """
    )
    gone = [sid(p, code) for code in ("b = 2", "c = 2", "c = 3", "c = 4", "e = 0", "f = 2")]
    c = edited(p, *(Edit("delete", g) for g in gone))
    assert text(c) == textwrap.dedent(
        """\
        if a:
            b = 1
        try:
            c = 1
        except E:
            pass
        for i in r:
            e = i
        while w:
            f = 1
        """
    )


def test_an_emptied_finally_without_handlers_stays_as_pass():
    # ``try:`` needs a handler or a ``finally``; dropping this one would not compile.
    p = program(
        """\
        try:
            d = 1
        finally:
            d = 2
        """
    )
    c = edited(p, Edit("delete", sid(p, "d = 2")))
    assert text(c) == "try:\n    d = 1\nfinally:\n    pass\n"


def test_delete_of_an_elif_drops_the_rest_of_the_chain():
    p = program(
        """\
        if a:
            x = 1
        elif b:
            x = 2
        else:
            x = 3
        """
    )
    c = edited(p, Edit("delete", sid(p, "if b:")))
    assert text(c) == "if a:\n    x = 1\n"
    assert c.live == {0, 1}


def test_delete_inside_an_elif_leaves_pass_in_that_branch():
    p = program(
        """\
        if a:
            x = 1
        elif b:
            x = 2
        else:
            x = 3
        """
    )
    c = edited(p, Edit("delete", sid(p, "x = 2")))
    assert text(c) == "if a:\n    x = 1\nelif b:\n    pass\nelse:\n    x = 3\n"


def test_a_block_whose_first_statement_went_starts_as_the_original_did():
    src = (
        "class A:\n    def __init__(self):\n        self.x = 1\n\n    def f(self):\n        return 2\n\n\n"
        "class B:\n\n    def __init__(self):\n        pass\n\n    # kept\n    def g(self):\n        return 3\n"
    )
    program = Program({"a.py": src}, "a.py")
    inits = [s.id for s in program.stmts if isinstance(s.node, cst.FunctionDef) and s.node.name.value == "__init__"]
    text = program.initial().with_edits(Edit("delete", i) for i in inits).files["a.py"]
    # A had no blank line under its header, B had one; a comment line stays
    assert text == (
        "class A:\n    def f(self):\n        return 2\n\n\n"
        "class B:\n\n    # kept\n    def g(self):\n        return 3\n"
    )


# --------------------------------------------------------------------------------------
# body: if -> then-branch, try -> body + else + finally, with -> body
# --------------------------------------------------------------------------------------

def test_body_of_an_if_keeps_the_then_branch_with_its_comments():
    p = program(IF_CHAIN)
    c = edited(p, Edit("body", 1))
    assert text(c) == textwrap.dedent(
        """\
        import torch
        # the gpu
        dev = "cuda"  # gpu
        n = 2
        x = torch.ones(n, device=dev)
        """
    )
    assert c.live == {0, 1, 2, 3, 7}
    assert editable_ids(c) == [0, 2, 3, 7]  # the hoisted ``if`` itself is no longer offered
    assert c.depth(2) == 0 and c.depth(3) == 0


def test_body_of_an_elif_makes_it_the_else_branch():
    p = program(IF_CHAIN)
    c = edited(p, Edit("body", sid(p, "if args.mps")))
    assert text(c) == textwrap.dedent(
        """\
        import torch
        if args.cuda:  # header comment goes with the header
            # the gpu
            dev = "cuda"  # gpu
            n = 2
        else:
            dev = "mps"
        x = torch.ones(n, device=dev)
        """
    )
    assert c.live == {0, 1, 2, 3, 4, 5, 7}  # not ``dev = "cpu"``


def test_body_of_a_try_keeps_the_path_without_an_exception():
    p = program(
        """\
        try:
            x = load(path)  # may fail
        except FileNotFoundError:
            x = None
        else:
            x = x.float()
        finally:
            log("done")
        use(x)
        """
    )
    c = edited(p, Edit("body", 0))
    assert text(c) == 'x = load(path)  # may fail\nx = x.float()\nlog("done")\nuse(x)\n'
    assert c.live == {0, 1, 3, 4, 5}  # not the handler's ``x = None``
    assert all(c.depth(i) == 0 for i in (1, 3, 4))


def test_body_of_a_with_block():
    p = program(
        """\
        with torch.no_grad():
            y = model(x)  # eval
            z = y.argmax(1)
        print(z)
        """
    )
    c = edited(p, Edit("body", 0))
    assert text(c) == "y = model(x)  # eval\nz = y.argmax(1)\nprint(z)\n"
    assert c.live == {0, 1, 2, 3}
    assert editable_ids(c) == [1, 2, 3]


def test_body_of_a_one_line_suite():
    p = program("if a: b = 1; c = 2\nd = 3\n")
    assert text(edited(p, Edit("body", 0))) == "b = 1; c = 2\nd = 3\n"


def test_body_of_an_if_inside_a_function_dedents_one_level():
    p = program(
        """\
        def main():
            if DEBUG:
                x = 1  # keep
            return x
        """
    )
    c = edited(p, Edit("body", 1))
    assert text(c) == "def main():\n    x = 1  # keep\n    return x\n"
    assert c.depth(2) == 1


# --------------------------------------------------------------------------------------
# else: if -> else branch; elif chains become an if
# --------------------------------------------------------------------------------------

def test_else_of_an_if_keeps_the_else_branch():
    p = program(
        """\
        if a:
            x = 1
        else:
            # fallback
            x = 2  # two
        y = x
        """
    )
    c = edited(p, Edit("else", 0))
    assert text(c) == "# fallback\nx = 2  # two\ny = x\n"
    assert c.live == {0, 2, 3}


def test_else_of_an_if_without_else_removes_it():
    p = program("if a:\n    x = 1\ny = 2\n")
    c = edited(p, Edit("else", 0))
    assert text(c) == "y = 2\n"
    assert c.live == {0, 2}  # the ``if`` is live (edited), its body is not


def test_else_of_an_if_with_elif_turns_the_elif_into_an_if():
    p = program(IF_CHAIN)
    c = edited(p, Edit("else", 1))
    assert text(c) == textwrap.dedent(
        """\
        import torch
        if args.mps:
            dev = "mps"
        else:
            dev = "cpu"
        x = torch.ones(n, device=dev)
        """
    )
    elif_ = sid(p, "if args.mps")
    assert c.live == {0, 1, elif_, elif_ + 1, elif_ + 2, 7}
    assert c.depth(elif_ + 1) == 1  # ``dev = "mps"``, inside the new ``if``


@pytest.mark.parametrize(
    "op, expected",
    [
        ("else", 'import torch\ndev = "cpu"\nx = torch.ones(n, device=dev)\n'),
        ("body", 'import torch\ndev = "mps"\nx = torch.ones(n, device=dev)\n'),
        ("delete", "import torch\nx = torch.ones(n, device=dev)\n"),
    ],
)
def test_else_of_an_if_applies_the_edit_of_its_elif(op, expected):
    p = program(IF_CHAIN)
    c = edited(p, Edit("else", 1), Edit(op, sid(p, "if args.mps")))
    assert text(c) == expected


def test_else_of_an_elif_keeps_the_final_else_in_place():
    p = program(IF_CHAIN)
    c = edited(p, Edit("else", sid(p, "if args.mps")))
    assert text(c) == textwrap.dedent(
        """\
        import torch
        if args.cuda:  # header comment goes with the header
            # the gpu
            dev = "cuda"  # gpu
            n = 2
        else:
            dev = "cpu"
        x = torch.ones(n, device=dev)
        """
    )


def test_else_of_an_elif_without_else_removes_it():
    p = program("if a:\n    x = 1\nelif b:\n    x = 2\n")
    assert text(edited(p, Edit("else", 2))) == "if a:\n    x = 1\n"


def test_else_of_a_middle_elif_keeps_the_next_elif():
    p = program("if a:\n    x = 1\nelif b:\n    x = 2\nelif c:\n    x = 3\n")
    assert text(edited(p, Edit("else", 2))) == "if a:\n    x = 1\nelif c:\n    x = 3\n"


# --------------------------------------------------------------------------------------
# replace: new text for a simple statement
# --------------------------------------------------------------------------------------

def test_replace_with_one_statement_keeps_the_comment_lines_above():
    p = program(DATA)
    c = edited(p, Edit("replace", 1, text="x = torch.zeros(3)\n"))
    assert text(c) == DATA.replace("x = torch.randn(3, 4)  # inputs", "x = torch.zeros(3)")
    assert c.live == {0, 1, 2, 3}
    assert editable_ids(c) == [0, 1, 2, 3]  # a replacement is a refinement, not a shape change


def test_replace_with_several_statements():
    p = program(DATA)
    c = edited(p, Edit("replace", 1, text="n = 3\nx = torch.randn(n, 4)\n"))
    assert text(c) == DATA.replace("x = torch.randn(3, 4)  # inputs", "n = 3\nx = torch.randn(n, 4)")


def test_replace_with_nothing_removes_the_statement():
    p = program(DATA)
    c = edited(p, Edit("replace", 1, text=""))
    assert text(c) == "import torch\ny = f(x, 2, dim=1)\nz = g(\n    x,\n    y,\n)\n"


def test_replace_inside_a_block_is_indented_there():
    p = program("for i in r:\n    x = i  # loop\n")
    c = edited(p, Edit("replace", 1, text="x = 0\nx += i\n"))
    assert text(c) == "for i in r:\n    x = 0\n    x += i\n"


def test_two_replacements_in_one_set_render_the_same_whatever_their_order():
    p = program(DATA)
    first = Edit("replace", 1, text="x = 1\n")
    second = Edit("replace", 1, text="x = 2\n")
    a = p.initial().with_edits([first, second])
    b = p.initial().with_edits([second, first])
    assert text(a) == text(b)


def test_delete_wins_over_a_replacement():
    p = program(DATA)
    c = edited(p, Edit("replace", 1, text="x = 1\n"), Edit("delete", 1))
    assert text(c) == "import torch\ny = f(x, 2, dim=1)\nz = g(\n    x,\n    y,\n)\n"
    assert 1 not in c.live


# --------------------------------------------------------------------------------------
# expr and remove: one expression of the original
# --------------------------------------------------------------------------------------

def test_expr_replaces_one_expression_and_parenthesises_only_where_needed():
    p = program(DATA)
    call = call_in(p, "y = f(")
    c = edited(p, Edit("expr", node=p.node_index(call.args[0].value), text="a + b"))
    assert text(c) == DATA.replace("f(x, 2, dim=1)", "f(a + b, 2, dim=1)")  # a whole argument
    c = edited(p, Edit("expr", node=p.node_index(call.func), text="a + b"))
    assert text(c) == DATA.replace("f(x, 2, dim=1)", "(a + b)(x, 2, dim=1)")  # a callee
    c = edited(p, Edit("expr", node=p.node_index(call), text="h(x)"))
    assert text(c) == DATA.replace("f(x, 2, dim=1)", "h(x)")
    assert c.live == {0, 1, 2, 3}


def test_expr_on_a_node_inside_a_multiline_call_keeps_the_layout():
    p = program(DATA)
    call = call_in(p, "z = g(")
    c = edited(p, Edit("expr", node=p.node_index(call.args[1].value), text="y.float()"))
    assert text(c) == DATA.replace("    y,\n)", "    y.float(),\n)")


@pytest.mark.parametrize(
    "removed, expected",
    [
        ((2,), "y = f(x, 2)"),  # the last argument: no trailing comma left behind
        ((1,), "y = f(x, dim=1)"),
        ((0,), "y = f(2, dim=1)"),
        ((1, 2), "y = f(x)"),
        ((0, 1, 2), "y = f()"),
    ],
)
def test_remove_takes_call_arguments_out(removed, expected):
    p = program(DATA)
    call = call_in(p, "y = f(")
    c = edited(p, *(Edit("remove", node=p.node_index(call.args[i])) for i in removed))
    assert text(c) == DATA.replace("y = f(x, 2, dim=1)", expected)


def test_remove_keeps_a_trailing_comma_the_original_had():
    p = program(DATA)
    call = call_in(p, "z = g(")
    c = edited(p, Edit("remove", node=p.node_index(call.args[0])))
    assert text(c) == DATA.replace("    x,\n    y,\n)", "    y,\n)")
    c = edited(p, Edit("remove", node=p.node_index(call.args[1])))
    # the last argument left ends as the original's last did: no line of bare indentation
    assert text(c) == DATA.replace("    x,\n    y,\n)", "    x,\n)")
    compile(text(c), "a.py", "exec")


def test_remove_of_a_keyword_argument_inside_a_nested_call():
    p = program("out = act(fc(h, bias=False), inplace=True)\n")
    outer = call_in(p, "out = act(")
    inner = outer.args[0].value
    c = edited(p, Edit("remove", node=p.node_index(inner.args[1])), Edit("remove", node=p.node_index(outer.args[1])))
    assert text(c) == "out = act(fc(h))\n"


# --------------------------------------------------------------------------------------
# inline: local modules
# --------------------------------------------------------------------------------------

HELPERS_BODY = '''\
"""Helpers."""
import torch

K = 2  # a constant


def make(n):
    return torch.ones(n)


def scale(t):
    return t * K
'''


def test_inline_of_from_import_pastes_the_module_and_binds_aliases():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("inline", 1, "helpers.py"))
    # The module's ``__future__`` import and main guard stay behind; ``scale as sc``
    # becomes an assignment after the pasted code.
    assert c.files == {
        "a.py": "import torch\n" + HELPERS_BODY + "sc = scale\nimport helpers\n\nx = make(3)  # build\n"
                                                  "y = sc(x) + helpers.K\n"
    }
    assert c.dropped_files == {"helpers.py"}
    assert 1 not in editable_ids(c)
    assert c.live == frozenset(range(len(p.stmts)))  # the module's statements live on in a.py


def test_inline_of_import_module_rewrites_attribute_reads():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("inline", 2, "helpers.py"))
    assert c.files == {
        "a.py": "import torch\nfrom helpers import make, scale as sc\n" + HELPERS_BODY + "\nx = make(3)  # build\n"
                                                                                         "y = sc(x) + K\n"
    }


def test_inline_of_import_as_rewrites_the_alias():
    p = program("import helpers as hp\nprint(hp.K, hp.make(1))\n", helpers="K = 2\n\n\ndef make(n):\n    return n\n")
    c = edited(p, Edit("inline", 0, "helpers.py"))
    assert c.files == {"a.py": "K = 2\n\n\ndef make(n):\n    return n\nprint(K, make(1))\n"}


def test_inline_pastes_the_module_as_edited():
    p = program(MAIN, helpers=HELPERS)
    make_def = sid(p, "def make", "helpers.py")
    c = edited(p, Edit("inline", 1, "helpers.py"), Edit("delete", make_def),
               Edit("delete", sid(p, "K = 2", "helpers.py")))
    assert c.files["a.py"] == textwrap.dedent(
        '''\
        import torch
        """Helpers."""
        import torch


        def scale(t):
            return t * K
        sc = scale
        import helpers

        x = make(3)  # build
        y = sc(x) + helpers.K
        '''
    )
    assert make_def not in c.live
