"""slice-to-failure and delete-statements (passes/statements.py): the exact program
before and after their units.
"""

from __future__ import annotations

from shrinkgpu.passes import DeleteStatements, HoistThen, SliceToFailure
from shrinkgpu.syntax import Edit, Facts

from .helpers import DEFS, after, dedent, each, line_of, start


# --------------------------------------------------------------------------------------
# SliceToFailure
# --------------------------------------------------------------------------------------

SLICE = """\
import os
import torch


def make():
    scale = 3
    return torch.randn(2) * scale


def report(v):
    print(v)


torch.manual_seed(0)
path = os.path.join("out", "log.txt")
x = make()
report(x)
y = x[5]
print(y, path)
"""


def test_slice_keeps_what_the_failing_line_depends_on_and_seeding():
    cand = start(SLICE, Facts(stack=(("a.py", line_of(SLICE, "y = x[5]")),)))
    assert after(SliceToFailure(), cand) == dedent(
        """\
        import torch


        def make():
            scale = 3
            return torch.randn(2) * scale


        torch.manual_seed(0)
        x = make()
        y = x[5]
        """
    )
    assert len(SliceToFailure().units(cand, 0)) == 1  # one optimistic test
    assert SliceToFailure().units(cand, 1) is None


def test_slice_drops_the_seeding_of_a_generator_nothing_else_uses():
    src = dedent(
        """\
        import random
        import numpy as np
        import torch

        random.seed(0)
        np.random.seed(0)
        torch.manual_seed(0)
        x = torch.randn(2)
        y = x[5]
        """
    )
    sites = tuple((("a.py", line_of(src, c), True)) for c in ("random.seed", "np.random.seed", "torch.manual_seed"))
    facts = Facts(stack=(("a.py", line_of(src, "y = x[5]")),), seed_sites=sites)
    assert after(SliceToFailure(), start(src, facts)) == "import torch\ntorch.manual_seed(0)\nx = torch.randn(2)\ny = x[5]\n"
    # ... but keeps it while the script still draws from it
    used = src.replace("x = torch.randn(2)", "x = torch.randn(2) * random.random()")
    facts = Facts(stack=(("a.py", line_of(used, "y = x[5]")),), seed_sites=sites)
    assert "random.seed(0)" in after(SliceToFailure(), start(used, facts))


def test_slice_follows_the_call_chain_into_a_function():
    src = """\
    import torch
    import torch.nn.functional as F


    def log(msg):
        print(msg)


    def main():
        logits = torch.randn(3, 4)
        target = torch.tensor([0, 2, 4])
        log("start")
        loss = F.cross_entropy(logits, target)
        log("end")


    main()
    """
    call, failing = line_of(src, "main()"), line_of(src, "loss = ")
    cand = start(src, Facts(stack=(("a.py", call), ("a.py", failing))))
    # ``main()`` uses the whole of ``main``: its statements (and ``log``) stay; the slice
    # has nothing to remove, so it proposes nothing.
    assert SliceToFailure().units(cand, 0) == []
    inner_only = start(src, Facts(stack=(("a.py", failing),)))
    assert after(SliceToFailure(), inner_only) == dedent(
        """\
        import torch
        import torch.nn.functional as F


        def main():
            logits = torch.randn(3, 4)
            target = torch.tensor([0, 2, 4])
            loss = F.cross_entropy(logits, target)
        """
    )


def test_slice_without_a_stack_proposes_nothing():
    assert SliceToFailure().units(start(SLICE), 0) == []


def test_slice_keeps_the_return_of_a_function_that_seeds():
    src = SLICE.replace("    scale = 3\n", "    torch.manual_seed(1)\n    scale = 3\n")
    cand = start(src, Facts(stack=(("a.py", line_of(src, "y = x[5]")),)))
    assert after(SliceToFailure(), cand) == dedent(
        """\
        import torch


        def make():
            torch.manual_seed(1)
            scale = 3
            return torch.randn(2) * scale


        torch.manual_seed(0)
        x = make()
        y = x[5]
        """
    )


# --------------------------------------------------------------------------------------
# DeleteStatements
# --------------------------------------------------------------------------------------

NET = "class Net:\n    def forward(self, x):\n        return x\n"


HELPER = "def helper():\n    return 2\n"


def test_delete_statements_level_0_is_the_module_body():
    cand = start(DEFS)
    assert each(DeleteStatements(), cand, 0) == [
        # import torch, what reads it, and ``helper``, which then has no reader left;
        # ``x = torch.ones(2)`` gives the same unit
        "\n\n" + NET,
        # def helper, ``y = helper() * x``, and ``print(y)``
        "import torch\n\n\n" + NET + "\n\nx = torch.ones(2)\nif x.sum() > 0:\n    z = 1\n",
        # class Net
        "import torch\n\n\n" + HELPER + "\n\nx = torch.ones(2)\nif x.sum() > 0:\n    y = helper() * x\n    z = 1\nprint(y)\n",
        # the if, ``print(y)``, and ``helper``
        "import torch\n\n\n" + NET + "\n\nx = torch.ones(2)\n",
        # print(y)
        "import torch\n\n\n" + HELPER + "\n\n" + NET + "\n\nx = torch.ones(2)\nif x.sum() > 0:\n    y = helper() * x\n    z = 1\n",
    ]


def test_delete_statements_unit_for_an_assignment_includes_its_readers():
    cand = start(DEFS)
    units = DeleteStatements().units(cand, 0)
    x_unit = next(u for u in units if Edit("delete", 6) in u)  # x = torch.ones(2)
    # The ``if`` reading x, ``print(y)`` reading what only the ``if`` binds, and the
    # plain bindings nothing reads any more: ``import torch`` and ``helper``.
    assert [e.stmt for e in x_unit] == [0, 1, 6, 7, 10]


def test_delete_statements_level_1_is_inside_one_compound_statement():
    cand = start(DEFS)
    assert after(DeleteStatements(), cand, 1) == dedent(
        """\
        import torch


        class Net:
            pass


        x = torch.ones(2)
        if x.sum() > 0:
            pass
        """
    )
    assert DeleteStatements().units(cand, 3) is None


def test_delete_statements_levels_follow_the_rendered_depth():
    cand = start(DEFS)
    hoisted = HoistThen().apply(cand, HoistThen().units(cand, 0))
    assert hoisted.files["a.py"].endswith("x = torch.ones(2)\ny = helper() * x\nz = 1\nprint(y)\n")
    level0 = {e.stmt for u in DeleteStatements().units(hoisted, 0) for e in u}
    assert {8, 9} <= level0  # ``y = helper() * x`` and ``z = 1`` are module-level now


def test_delete_statements_on_an_empty_program():
    assert DeleteStatements().units(start(""), 0) is None


def test_delete_statements_inside_a_method_keeps_the_method():
    cand = start(DEFS)
    assert after(DeleteStatements(), cand, 2) == DEFS.replace("        return x\n", "        pass\n")
    trainer = start(
        """\
        class Trainer:
            def log(self, msg):
                print(msg)

            def step(self):
                self.log("step")
                return 6


        fail(Trainer().step())
        """
    )
    assert each(DeleteStatements(), trainer, 2) == [
        "class Trainer:\n    def log(self, msg):\n        pass\n\n    def step(self):\n"
        '        self.log("step")\n        return 6\n\n\nfail(Trainer().step())\n',
        "class Trainer:\n    def log(self, msg):\n        print(msg)\n\n    def step(self):\n"
        "        return 6\n\n\nfail(Trainer().step())\n",
        "class Trainer:\n    def log(self, msg):\n        print(msg)\n\n    def step(self):\n"
        '        self.log("step")\n\n\nfail(Trainer().step())\n',
    ]
