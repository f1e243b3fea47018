"""syntax/code.py: source text of nodes, expressions that stand in any position, calls
named in a recorded line, and the name a file binds a module to."""

from __future__ import annotations

import libcst as cst

from shrinkgpu.syntax.code import calls_named, code_of, module_name, parse_expression


def test_the_code_of_a_node_is_its_source_text():
    call = cst.parse_expression("torch.gather(x, 1, idx)")
    assert code_of(call) == "torch.gather(x, 1, idx)"
    assert code_of(cst.parse_statement("y = x + 1\n")) == "y = x + 1\n"


def test_an_expression_that_is_not_an_atom_is_parenthesised():
    assert code_of(parse_expression("a + b")) == "(a + b)"
    assert code_of(parse_expression("f(x)[0]")) == "f(x)[0]"
    assert code_of(parse_expression("(a + b)")) == "(a + b)"
    # standing where an operand was, it keeps its meaning: 2 * (a + b), not 2 * a + b
    product = cst.parse_expression("2 * c").with_changes(right=parse_expression("a + b"))
    assert code_of(product) == "2 * (a + b)"


def test_calls_named_finds_the_callee_however_it_is_reached():
    found = calls_named("loss = F.cross_entropy(logits, cross_entropy(t))", "cross_entropy")
    assert [len(call.args) for call in found] == [2, 1]
    assert calls_named("torch.gather(x, 1,", "gather") == []  # a line that does not parse alone
    assert calls_named("gather_all(x)", "gather") == []


def test_the_name_a_file_binds_a_module_to():
    assert module_name("import numpy as np\n", "numpy") == "np"
    assert module_name("import torch.nn\n", "torch") == "torch"
    assert module_name("from torch import nn\n", "torch") is None
    assert module_name("def f():\n    import torch\n", "torch") is None  # not the top level
    assert module_name("import (\n", "torch") is None
