"""Statement-level dependencies (syntax/deps.py): where a line is, who binds and reads a
name, what a deletion takes with it, and the backward slice.
"""

from __future__ import annotations

import pytest

from shrinkgpu.syntax import Edit

from .helpers import program, sid

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
    assert [deps.statement_at("a.py", line) for line in range(1, 14)] == [0, None, 1, 2, None, 3, 4, 5, 6, 7, 8, 9,
                                                                          None]
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
