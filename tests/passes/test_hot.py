"""cut-hot-loops (passes/hot.py): the loops where the original's time went are cut first."""

from __future__ import annotations

from shrinkgpu.passes import CutHotLoops
from shrinkgpu.syntax import Facts

from .helpers import dedent, each, line_of, start

SOURCE = """\
import torch
model = torch.nn.Embedding(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3000):
    loss = model(torch.randint(0, 8, (16,))).sum()
    loss.backward()
    opt.step()
idx = torch.tensor([1])
for _ in range(20):
    model(idx)
    idx = idx + 1
"""


def _cand(hot):
    stack = (("a.py", line_of(SOURCE, "model(idx)")),)
    return start(SOURCE, Facts(stack=stack, hot_loops=tuple(("a.py", h, s) for h, s in hot)))


def test_a_hot_loop_the_failure_is_not_in_is_deleted_then_cut_to_one_step():
    cand = _cand([("for step in range(3000):", 0.97)])
    [deleted] = each(CutHotLoops(), cand, 0)
    assert deleted == dedent("""\
        import torch
        model = torch.nn.Embedding(8, 4)
        idx = torch.tensor([1])
        for _ in range(20):
            model(idx)
            idx = idx + 1
        """)
    [once] = each(CutHotLoops(), cand, 1)
    assert "step = 0\nloss = model(torch.randint(0, 8, (16,))).sum()\nloss.backward()\nopt.step()\n" in once
    assert CutHotLoops().units(cand, 2) is None


def test_a_hot_loop_around_the_failure_becomes_its_failing_iteration():
    cand = _cand([("for _ in range(20):", 0.6)])
    [text] = each(CutHotLoops(), cand, 0)
    assert "_ = 0\nmodel(idx)\nidx = idx + 1\n" in text  # the loop iteration was not counted: the first
    assert not CutHotLoops().units(cand, 1)


def test_nothing_when_no_loop_is_hot_or_the_header_changed():
    assert CutHotLoops().units(_cand([]), 0) == []
    assert CutHotLoops().units(_cand([("for step in range(100):", 0.9)]), 0) == []
