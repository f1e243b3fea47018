"""slice-to-failure and delete-statements (passes/statements.py): the exact program
before and after their units.
"""

from __future__ import annotations

from shrinkgpu.passes import DeleteDefinitions, DeleteStatements, HoistThen, SliceToFailure
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
    assert after(SliceToFailure(), start(src, facts)) == ("import torch\ntorch.manual_seed(0)\nx = torch.randn(2)\n"
                                                          "y = x[5]\n")
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
        "import torch\n\n\n" + HELPER + "\n\nx = torch.ones(2)\nif x.sum() > 0:\n    y = helper() * x\n    z = 1\n"
                                        "print(y)\n",
        # the if, ``print(y)``, and ``helper``
        "import torch\n\n\n" + NET + "\n\nx = torch.ones(2)\n",
        # print(y)
        "import torch\n\n\n" + HELPER + "\n\n" + NET + "\n\nx = torch.ones(2)\nif x.sum() > 0:\n    y = helper() * x\n"
                                                       "    z = 1\n",
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


RETURNS = """\
import torch


def load(n):
    x = torch.randn(n)
    return x, n


def log(v):
    print(v)
    return v


def check(x):
    return x.sum() > 0


def scale(x):
    return x * 2


x, n = load(4)
log(n)
if check(x):
    print("pos")
y = scale(x)[n]
"""


def test_delete_statements_keeps_a_return_whose_value_a_caller_off_the_stack_uses():
    cand = start(RETURNS, Facts(stack=(("a.py", line_of(RETURNS, "y = scale(x)[n]")),)))
    got = each(DeleteStatements(), cand, 1)
    # ``x, n = load(4)`` would unpack None: neither the return nor what it reads is
    # offered (deleting ``x = ...`` takes the return with it)
    assert all("    x = torch.randn(n)\n    return x, n\n" in t for t in got), got
    # a value discarded (``log(n)``), only tested (``if check(x):``), or used on the
    # failing line itself (which may fail before the call): the return is offered
    assert RETURNS.replace("    print(v)\n    return v\n", "    print(v)\n") in got
    assert RETURNS.replace("    return x.sum() > 0\n", "    pass\n") in got
    assert RETURNS.replace("    return x * 2\n", "    pass\n") in got
    # the whole function still goes (with its caller and what reads the caller's names)
    assert any("def load" not in t for t in each(DeleteStatements(), cand, 0))


def test_a_generators_return_and_a_methods_return_are_offered_as_before():
    src = dedent(
        """\
        def rows(n):
            yield n
            return n


        class Net:
            def forward(self, x):
                return x + 1


        a, = rows(1)
        b = Net().forward(1)
        fail(a, b)
        """
    )
    got = each(DeleteStatements(), start(src, Facts(stack=(("a.py", line_of(src, "fail(a, b)")),))), 1)
    assert src.replace("    yield n\n    return n\n", "    yield n\n") in got
    assert any("    def forward(self, x):\n        pass\n" in t for t in each(DeleteStatements(), start(src), 2))


MEMBERS = """\
import dataclasses
import torch.nn as nn


@dataclasses.dataclass
class Config:
    seed: int = 1
    width: int = 4


class Vocab:
    pad, sep = 0, 1

    def __init__(self, tokens):
        self.itos = sorted(tokens)

    def encode(self, toks):
        return [self.itos.index(t) for t in toks] + [self.sep]

    def unused(self):
        return 0


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        return self.fc(x)


cfg = Config(**{"seed": 2})
vocab = Vocab(["a", "b"])
ids = vocab.encode(["a"])
fail(Block(cfg), ids, vocab.pad)
"""


def test_delete_statements_keeps_the_members_of_a_class_that_callers_use():
    cand = start(MEMBERS, Facts(stack=(("a.py", line_of(MEMBERS, "fail(")),)))
    members = each(DeleteStatements(), cand, 1)
    assert members == [
        # what no caller reads
        MEMBERS.replace("\n    def unused(self):\n        return 0\n", ""),
        # ``Block(cfg)`` and ``Block``'s forward are on the failing line, which may fail
        # before it makes them: offered
        MEMBERS.replace("    def __init__(self, cfg):\n        super().__init__()\n"
                        "        self.fc = nn.Linear(cfg.width, cfg.width)\n\n", ""),
        MEMBERS.replace("\n    def forward(self, x):\n        return self.fc(x)\n", ""),
    ]
    # not offered: the dataclass fields ``Config(**...)`` may pass, ``Vocab(["a", "b"])``'s
    # ``__init__``, ``vocab.encode``, and ``sep`` read through ``self`` (with ``pad``, as
    # one line binds both); nor by delete-definitions
    assert MEMBERS.replace("\n    def unused(self):\n        return 0\n", "") in each(DeleteDefinitions(), cand)
    assert not any("def encode" not in t and "class Vocab" in t for t in each(DeleteDefinitions(), cand))


def test_a_member_defined_by_another_class_too_is_offered():
    # (which of the two ``vocab.encode`` calls is not followed)
    other = MEMBERS.replace("class Block(nn.Module):",
                            "class Other:\n    def encode(self, toks):\n        return toks\n\n\n"
                        "class Block(nn.Module):")
    cand = start(other, Facts(stack=(("a.py", line_of(other, "fail(")),)))
    assert any("[self.sep]" not in t for t in each(DeleteStatements(), cand, 1))


def test_a_member_read_through_the_parameter_a_helper_binds_the_instance_to_is_kept():
    src = dedent(
        """\
        class Vocab:
            sep = 1

            def __init__(self, tokens):
                self.itos = sorted(tokens)

            def encode(self, toks):
                return [self.itos.index(t) for t in toks]

            def unused(self):
                return 0


        def to_ids(words, vocab):
            return vocab.encode(words) + [vocab.sep]


        vocab = Vocab(["a", "b"])
        ids = to_ids(["a"], vocab=vocab)
        fail(ids)
        """
    )
    cand = start(src, Facts(stack=(("a.py", line_of(src, "fail(")),)))
    # ``vocab.encode`` and ``vocab.sep`` in ``to_ids`` read the instance ``to_ids(..., vocab=vocab)``
    # passes: only ``unused`` is offered (and ``to_ids``'s return, unpacked by no one but
    # read by ``ids = ...``, stays)
    assert each(DeleteStatements(), cand, 1) == [src.replace("\n    def unused(self):\n        return 0\n", "")]
    # passed to a method instead, the parameter is not followed
    method = src.replace("def to_ids(words, vocab):", "class Tok:\n    def to_ids(self, words, vocab):").replace(
        "    return vocab.encode(words) + [vocab.sep]", "        return vocab.encode(words) + [vocab.sep]").replace(
        "ids = to_ids([\"a\"], vocab=vocab)", "ids = Tok().to_ids([\"a\"], vocab=vocab)")
    offered = each(DeleteStatements(), start(method, Facts(stack=(("a.py", line_of(method, "fail(")),))), 1)
    assert any("    sep = 1\n" not in t for t in offered), offered
