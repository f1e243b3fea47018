"""loop-to-first-iteration, loop-to-failing-iteration and while-to-body
(passes/loops.py): the exact program before and after their units.
"""

from __future__ import annotations

from shrinkgpu.passes import LoopToFailingIteration, LoopToFirstIteration, WhileToBody
from shrinkgpu.syntax import Facts

from .helpers import after, dedent, each, start


def test_loop_to_first_iteration_binds_the_first_item():
    cand = start(
        """\
        for epoch in range(1, 5):
            for x, y in loader:
                h = model(x)
        """
    )
    assert each(LoopToFirstIteration(), cand) == [
        dedent(
            """\
            epoch = 1
            for x, y in loader:
                h = model(x)
            """
        ),
        dedent(
            """\
            for epoch in range(1, 5):
                x, y = next(iter(loader))
                h = model(x)
            """
        ),
    ]


def test_loop_to_first_iteration_over_a_literal_binds_its_first_element():
    # What a person writes, and smaller than ``next(iter([...]))`` (which, larger than the
    # loop, the search would never try)
    assert each(LoopToFirstIteration(), start("for lr in [1e-3, 1e-2]:\n    fit(lr)\n")) == ["lr = 1e-3\nfit(lr)\n"]
    assert each(LoopToFirstIteration(), start("for a, b in ((1, 2), (3, 4)):\n    g(a, b)\n")) == [
        "a, b = (1, 2)\ng(a, b)\n"]
    # the one pass a saved state's replay writes, ``for x in [(x)]:``
    assert each(LoopToFirstIteration(), start("def f(x):\n    for x in [(x)]:\n        g(x)\n")) == [
        "def f(x):\n    x = x\n    g(x)\n"]
    # parentheses that are not an atom's stay; a starred part has no first element to name
    assert each(LoopToFirstIteration(), start("for y in [(z := 3)]:\n    g(y)\n")) == ["y = (z := 3)\ng(y)\n"]
    assert each(LoopToFirstIteration(), start("for x in [*xs]:\n    g(x)\n")) == ["x = next(iter([*xs]))\ng(x)\n"]


def test_loop_to_first_iteration_leaves_loops_with_break_else_or_async_alone():
    for src in (
        "for x in xs:\n    if x:\n        break\n    f(x)\n",
        "for x in xs:\n    continue\n",
        "for x in xs:\n    f(x)\nelse:\n    g()\n",
    ):
        assert LoopToFirstIteration().units(start(src), 0) == []
    # a break that belongs to an inner loop is fine
    cand = start("for x in xs:\n    for y in x:\n        break\n")
    assert after(LoopToFirstIteration(), cand) == "x = next(iter(xs))\nfor y in x:\n    break\n"


def test_while_to_body_runs_the_body_once():
    cand = start("i = 0\nwhile i < 10:\n    step(i)\n    i += 1\n")
    assert after(WhileToBody(), cand) == "i = 0\nstep(i)\ni += 1\n"
    assert WhileToBody().units(start("while True:\n    if done():\n        break\n"), 0) == []


LOOPS_SRC = """\
import torch

data = [torch.arange(3) for _ in range(6)]
table = torch.zeros(4)
for epoch in range(1, 3):
    for step, x in enumerate(loader):
        for y in data:
            table[x + y]
"""


def test_loop_to_the_failing_iteration_the_original_run_counted():
    facts = Facts(loops=(
        ("a.py", "for epoch in range(1, 3):", 1),
        ("a.py", "for step, x in enumerate(loader):", 3),
        ("a.py", "for y in data:", 4),
    ))
    cand = start(LOOPS_SRC, facts)
    outs = each(LoopToFailingIteration(), cand)
    head = "import torch\n\ndata = [torch.arange(3) for _ in range(6)]\ntable = torch.zeros(4)\n"
    assert outs == [
        head + "epoch = 2\nfor step, x in enumerate(loader):\n    for y in data:\n        table[x + y]\n",
        head + "for epoch in range(1, 3):\n    import itertools\n"
               "    step, x = (3, next(itertools.islice(loader, 3, None)))\n"
        "    for y in data:\n        table[x + y]\n",
        head + "for epoch in range(1, 3):\n    for step, x in enumerate(loader):\n        y = data[4]\n"
               "        table[x + y]\n",
    ]
    # without counted iterations (or at iteration 0) there is no level-1 unit
    assert LoopToFailingIteration().units(start(LOOPS_SRC), 0) == []
