"""syntax/queries.py: the questions passes ask of a program (names read, bound and free,
where a statement runs, the items of a loop) on small programs."""

from __future__ import annotations

import libcst as cst

from shrinkgpu.syntax import Program
from shrinkgpu.syntax.queries import (
    assigned_names,
    bound_names,
    encloses,
    first_item,
    free_names,
    module_names,
    nth_item,
    one_iteration,
    param_names,
    qualname_of,
    runs_once,
    variable_names,
)

NESTED = """\
import torch.nn as nn
import numpy


def main():
    def step(x):
        return x
    return step


class RopeLM(nn.Module):
    def __init__(self):
        self.fc = 1
"""


def sid_of(program: Program, code: str) -> int:
    [sid] = [s.id for s in program.stmts if cst.Module([]).code_for_node(s.node).strip().startswith(code)]
    return sid


def fn(text: str) -> cst.FunctionDef:
    node = cst.parse_statement(text)
    assert isinstance(node, cst.FunctionDef)
    return node


def test_the_qualified_name_python_gives_the_code_a_statement_runs_in():
    program = Program({"a.py": NESTED}, "a.py")
    assert qualname_of(program, sid_of(program, "return x")) == "main.<locals>.step"
    assert qualname_of(program, sid_of(program, "self.fc = 1")) == "RopeLM.__init__"
    assert qualname_of(program, sid_of(program, "import numpy")) == "<module>"
    assert encloses(program, sid_of(program, "def main"), sid_of(program, "return x"))
    assert not encloses(program, sid_of(program, "class RopeLM"), sid_of(program, "return x"))
    assert module_names(program) == {"nn", "numpy"}


def test_names_read_bound_and_free():
    assert variable_names(cst.parse_expression("f(x.fc, seed=s)")) == {"f", "x", "seed", "s"}
    assert variable_names(cst.parse_expression("f(x.fc, seed=s)"), keywords=False) == {"f", "x", "s"}
    assert assigned_names(cst.parse_expression("(a, [b, c])")) == ["a", "b", "c"]
    assert assigned_names(cst.parse_expression("a.b")) == []
    block = cst.parse_module("x, y = 1, 2\nfor i in r:\n    pass\nimport torch.nn\nwith o as f:\n"
                             "    z = [k for k in y]\n")
    assert bound_names(block) == {"x", "y", "i", "torch", "f", "z"}  # not the comprehension's k
    step = fn("def step(self, b, *rest, lr=1, **kw):\n    out = model(b) * lr + bias\n    return out\n")
    assert param_names(step) == {"self", "b", "rest", "lr", "kw"}
    assert free_names(step) == {"model", "bias"}


def test_the_items_of_what_a_loop_walks():
    assert first_item(cst.parse_expression("range(5)")) == "0"
    assert first_item(cst.parse_expression("range(1, 5)")) == "1"
    assert first_item(cst.parse_expression('["adam", "sgd"]')) == '"adam"'
    assert first_item(cst.parse_expression("loader")) == "next(iter(loader))"
    assert nth_item(cst.parse_expression("range(1, 5)"), 2) == ("3", None)
    assert nth_item(cst.parse_expression("enumerate(range(4))"), 2) == ("(2, 2)", None)
    assert nth_item(cst.parse_expression("loader"), 3) == ("next(itertools.islice(loader, 3, None))", "itertools")


def test_one_pass_through_a_loop_body_stands_alone_unless_the_loop_exits_on_its_own():
    loop = cst.parse_statement("for step in range(1, 10):\n    x = f(step)\n    g(x)\n")
    assert one_iteration(loop, 0) == "step = 1\nx = f(step)\ng(x)\n"
    assert one_iteration(loop, 4) == "step = 5\nx = f(step)\ng(x)\n"
    assert runs_once(loop)
    for text in ("for s in r:\n    if s:\n        break\n", "for s in r:\n    pass\nelse:\n    done()\n"):
        assert not runs_once(cst.parse_statement(text)) and one_iteration(cst.parse_statement(text), 0) is None
    # a ``break`` of a loop nested in the body belongs to that loop
    assert runs_once(cst.parse_statement("for s in r:\n    for t in s:\n        break\n"))
