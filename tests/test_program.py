"""The program representation: an immutable libcst original, a statement table, edits,
and the renderer that turns a candidate back into source text.

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

from shrinkgpu.syntax import Candidate, Edit, Facts, Program
from shrinkgpu.syntax.program import inline_candidates

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def program(src: str, facts: Facts | None = None, **modules: str) -> Program:
    """``a.py`` (the main file) from ``src``, plus ``name.py`` for each keyword."""
    files = {"a.py": textwrap.dedent(src)}
    files.update({f"{name}.py": textwrap.dedent(text) for name, text in modules.items()})
    return Program(files, "a.py", facts)


def sid(p: Program, code: str, file: str = "a.py") -> int:
    """The id of the one statement of ``file`` whose own text starts with ``code``."""
    found = [s.id for s in p.stmts if s.file == file and _own_text(p, s).startswith(code)]
    assert len(found) == 1, (code, found)
    return found[0]


def _own_text(p: Program, s) -> str:
    """A statement's code without the blank and comment lines above it."""
    lines = p.modules[s.file].code_for_node(s.node).splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    return "\n".join(lines).strip()


def edited(p: Program, *edits: Edit) -> Candidate:
    return p.initial().with_edits(edits)


def text(c: Candidate, file: str = "a.py") -> str:
    return c.files[file]


def editable_ids(c: Candidate) -> list[int]:
    return [s.id for s in c.editable()]


def call_in(p: Program, code: str) -> cst.Call:
    """The outermost call on the right of the assignment or expression statement ``code``."""
    line = p.stmts[sid(p, code)].node
    small = line.body[0]
    value = small.value
    assert isinstance(value, cst.Call)
    return value


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
            first = _own_text(p, s).splitlines()[0].strip()
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
            first = _own_text(p, s).splitlines()[0].strip()
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
# The statement table
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


# --------------------------------------------------------------------------------------
# body: if -> then-branch, try -> body + else + finally, with -> body
# --------------------------------------------------------------------------------------

IF_CHAIN = """\
import torch
if args.cuda:  # header comment goes with the header
    # the gpu
    dev = "cuda"  # gpu
    n = 2
elif args.mps:
    dev = "mps"
else:
    dev = "cpu"
x = torch.ones(n, device=dev)
"""


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


def test_depth_of_a_statement_in_an_elif_branch_is_its_rendered_depth():
    p = program(IF_CHAIN)
    c = p.initial()
    assert c.depth(sid(p, 'dev = "cuda"')) == 1
    assert c.depth(sid(p, 'dev = "mps"')) == 1
    assert c.depth(sid(p, 'dev = "cpu"')) == 1


# --------------------------------------------------------------------------------------
# replace: new text for a simple statement
# --------------------------------------------------------------------------------------

DATA = """\
import torch

# make data
x = torch.randn(3, 4)  # inputs
y = f(x, 2, dim=1)
z = g(
    x,
    y,
)
"""


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


def test_a_newer_replace_supersedes_an_older_one_for_the_same_statement():
    p = program(DATA)
    c = p.initial().with_edits([Edit("replace", 1, text="x = 1\n")]).with_edits([Edit("replace", 1, text="x = 2\n")])
    assert c.edits == {Edit("replace", 1, text="x = 2\n")}
    assert "x = 2\ny = f" in text(c)


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


def test_node_index_is_stable_for_one_node():
    p = program(DATA)
    call = call_in(p, "y = f(")
    assert p.node_index(call) == p.node_index(call)
    assert p.node_index(call) != p.node_index(call.args[0])


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
# inline and drop: local modules
# --------------------------------------------------------------------------------------

MAIN = """\
import torch
from helpers import make, scale as sc
import helpers

x = make(3)  # build
y = sc(x) + helpers.K
"""
HELPERS = '''\
"""Helpers."""
from __future__ import annotations
import torch

K = 2  # a constant


def make(n):
    return torch.ones(n)


def scale(t):
    return t * K


if __name__ == "__main__":
    print(make(1))
'''
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
        "a.py": "import torch\n" + HELPERS_BODY + "sc = scale\nimport helpers\n\nx = make(3)  # build\ny = sc(x) + helpers.K\n"
    }
    assert c.dropped_files == {"helpers.py"}
    assert 1 not in editable_ids(c)
    assert c.live == frozenset(range(len(p.stmts)))  # the module's statements live on in a.py


def test_inline_of_import_module_rewrites_attribute_reads():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("inline", 2, "helpers.py"))
    assert c.files == {
        "a.py": "import torch\nfrom helpers import make, scale as sc\n" + HELPERS_BODY + "\nx = make(3)  # build\ny = sc(x) + K\n"
    }


def test_inline_of_import_as_rewrites_the_alias():
    p = program("import helpers as hp\nprint(hp.K, hp.make(1))\n", helpers="K = 2\n\n\ndef make(n):\n    return n\n")
    c = edited(p, Edit("inline", 0, "helpers.py"))
    assert c.files == {"a.py": "K = 2\n\n\ndef make(n):\n    return n\nprint(K, make(1))\n"}


def test_inline_pastes_the_module_as_edited():
    p = program(MAIN, helpers=HELPERS)
    make_def = sid(p, "def make", "helpers.py")
    c = edited(p, Edit("inline", 1, "helpers.py"), Edit("delete", make_def), Edit("delete", sid(p, "K = 2", "helpers.py")))
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


def test_inline_of_a_deleted_import_does_not_drop_the_module():
    p = program(MAIN, helpers=HELPERS)
    c = edited(p, Edit("inline", 1, "helpers.py"), Edit("delete", 1))
    assert sorted(c.files) == ["a.py", "helpers.py"]
    assert c.files["helpers.py"] == HELPERS
    assert c.dropped_files == frozenset()


def test_inline_candidates_are_live_imports_of_local_modules():
    p = program(MAIN + "import os\nfrom pkg.sub import thing\nimport pkg.sub\n", helpers=HELPERS, **{"pkg/sub": "thing = 1\n"})
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


def test_with_edits_of_nothing_is_the_same_candidate():
    c = program(DATA).initial()
    assert c.with_edits([]) is c


def test_key_identifies_the_rendered_text():
    p = program("x = 1\ny = 2\n")
    a = edited(p, Edit("delete", 0))
    b = edited(p, Edit("replace", 0, text=""))
    assert a.edits != b.edits and a.key == b.key == (("a.py", "y = 2\n"),)


# --------------------------------------------------------------------------------------
# Dependencies
# --------------------------------------------------------------------------------------

DEPS = """\
import torch

def helper(t):
    return t + 1

torch.manual_seed(0)
x = torch.randn(3)
y = helper(x)
x.add_(1)
z = x * 2
w = 5
print(y, z)
"""
# ids:   0 import   1 def helper   2 return   3 manual_seed   4 x =   5 y =   6 x.add_
#        7 z =      8 w = 5        9 print


def test_statement_at_finds_the_innermost_statement_of_a_line():
    p = program(DEPS)
    deps = p.deps
    assert [deps.statement_at("a.py", line) for line in range(1, 14)] == [0, None, 1, 2, None, 3, 4, 5, 6, 7, 8, 9, None]
    assert deps.statement_at("other.py", 1) is None


def test_statement_at_a_continuation_line_of_a_multiline_statement():
    p = program("x = f(\n    1,\n    2,\n)\nif x:\n    y = (1 +\n         2)\n")
    assert [p.deps.statement_at("a.py", n) for n in range(1, 8)] == [0, 0, 0, 0, 1, 2, 2]


def test_binders_and_readers():
    p = program(DEPS)
    deps = p.deps
    x_read = p.stmts[7].node.body[0].value.left  # the ``x`` of ``z = x * 2``
    assert deps.binders(x_read) == {4}
    assert deps.readers(4, "x") == {5, 6, 7}
    assert deps.readers(1, "helper") == {5}
    assert deps.readers(0, "torch") == {3, 4}
    assert deps.readers(8, "w") == set()


def test_binders_of_a_name_bound_in_two_branches():
    p = program("if c:\n    x = 1\nelse:\n    x = 2\nprint(x)\n")
    read = p.stmts[3].node.body[0].value.args[0].value
    assert p.deps.binders(read) == {1, 2}


def test_deletion_closure_takes_the_users_left_without_a_binding():
    p = program(DEPS)
    deps, c = p.deps, p.initial()
    closure = {i: sorted(deps.deletion_closure(c, [i])) for i in range(len(p.stmts))}
    assert closure == {
        0: [0, 3, 4, 5, 6, 7, 9],  # everything that reads ``torch``, and their users
        1: [1, 2, 5, 9],  # the def, its body, ``y = helper(x)`` and ``print(y, z)``
        2: [2],
        3: [3],
        4: [4, 5, 6, 7, 9],
        5: [5, 9],
        6: [6],
        7: [7, 9],
        8: [8],
        9: [9],
    }


def test_deletion_closure_spares_ignored_statements_and_dead_ones():
    p = program(DEPS)
    deps, c = p.deps, p.initial()
    assert sorted(deps.deletion_closure(c, [1], ignore=frozenset({5}))) == [1, 2]
    assert sorted(deps.deletion_closure(c, [4], ignore=frozenset({7}))) == [4, 5, 6, 9]
    # Statements that are already gone are not part of a closure.
    gone = c.with_edits([Edit("delete", 7)])
    assert sorted(deps.deletion_closure(gone, [4])) == [4, 5, 6, 9]
    assert deps.deletion_closure(gone, [7]) == frozenset()


def test_deletion_closure_keeps_a_user_with_another_binding():
    p = program("if c:\n    x = 1\nelse:\n    x = 2\nprint(x)\n")
    c = p.initial()
    assert sorted(p.deps.deletion_closure(c, [1])) == [1]
    # Both branches gone: the ``if`` left with nothing inside goes too, and ``print(x)``
    # has no binding left.
    assert sorted(p.deps.deletion_closure(c, [1, 2])) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "src, closure",
    [
        ("for i in r:\n    x = i\ny = 1\n", [0, 1]),
        ("while w:\n    x = 1\n", [0, 1]),
        ("with ctx():\n    x = 1\n", [0, 1]),
        ("if a:\n    x = 1\n", [0, 1]),
        ("if a:\n    x = 1\nelif b:\n    x = 2\n", [1]),  # the ``if`` still holds the elif
        ("def f():\n    x = 1\n", [1]),  # a def stays, as ``pass``
        ("try:\n    x = 1\nexcept E:\n    pass\n", [1]),
    ],
)
def test_deletion_closure_takes_a_loop_with_or_if_left_empty(src, closure):
    p = program(src)
    assert sorted(p.deps.deletion_closure(p.initial(), [1])) == closure


def test_deletion_closure_follows_function_scopes():
    p = program(
        """\
        def f(a):
            b = a * 2
            return b
        x = 1
        def g():
            x = 3
            return x
        print(x)
        """
    )
    c = p.initial()
    assert sorted(p.deps.deletion_closure(c, [sid(p, "b = a")])) == [1, 2]
    # ``x = 3`` inside g binds a local: the module's ``print(x)`` does not need it.
    assert sorted(p.deps.deletion_closure(c, [sid(p, "x = 3")])) == [5, 6]
    assert sorted(p.deps.deletion_closure(c, [sid(p, "x = 1")])) == [3, 7]


def test_backward_slice_follows_bindings_mutations_and_seeding():
    p = program(DEPS)
    deps, c = p.deps, p.initial()
    # ``z = x * 2`` needs x, the in-place ``x.add_(1)``, torch, and the seeding call.
    assert sorted(deps.backward_slice(c, [7])) == [0, 3, 4, 6, 7]
    # ``w = 5`` needs nothing, but seeding calls are always part of a slice.
    assert sorted(deps.backward_slice(c, [8])) == [0, 3, 8]
    # A slice takes the whole body of a function it calls.
    assert sorted(deps.backward_slice(c, [9])) == [0, 1, 2, 3, 4, 5, 6, 7, 9]
    # Deleted statements are not in a slice.
    assert sorted(deps.backward_slice(c.with_edits([Edit("delete", 6)]), [7])) == [0, 3, 4, 7]


def test_backward_slice_keeps_enclosing_statements_and_attribute_writers():
    p = program(
        """\
        class Cfg:
            pass
        cfg = Cfg()
        cfg.n = 4
        noise = 1
        def run():
            if cfg:
                return cfg.n
        run()
        """
    )
    c = p.initial()
    ret = sid(p, "return cfg.n")
    assert sorted(p.deps.backward_slice(c, [ret])) == [0, 1, 2, 3, 5, 6, ret]


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


def test_order_is_tokens_plus_block_and_loop_costs_then_the_magnitude_of_constants():
    from shrinkgpu.syntax.tokens import measure

    src = "for i in range(30):\n    xs = [j for j in range(4)]\n    while i:\n        i -= 1  # comment\n"
    # tokens, indented blocks, loops (not the comprehension's ``for``), integer literals
    assert measure(src) == (26, 2, 2, 35)
    cand = program(src).initial()
    assert cand.order == (26 + 5 * 2 + 10 * 2, 35)
    straight = program("i = 0\nxs = [j for j in range(4)]\ni -= 1\n").initial()
    assert straight.order < cand.order


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
