"""flatten-module (passes/modules.py): a module class made once becomes ``__init__``'s
bindings and a function of its ``forward`` where the instance was made; the exact
program before and after."""

from __future__ import annotations

from shrinkgpu.passes import FlattenModule

from .helpers import dedent, each, start

HEAD = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


"""

REFINER = HEAD + """\
class Refiner(nn.Module):
    def __init__(self, cfg, width=8):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = F.relu(self.fc(x))
        if h.mean() > self.cfg.threshold:  # data-dependent
            h = h + 1
        return h


"""


def test_an_instance_made_once_becomes_its_layers_and_a_function_of_its_forward():
    cand = start(REFINER + "def train(cfg):\n    model = Refiner(cfg.model)\n"
                           "    return torch.compile(model)(torch.ones(2, 8))\n")
    assert each(FlattenModule(), cand) == [
        HEAD
        + dedent(
            """\
            def train(cfg):
                model_cfg = cfg.model
                width = 8
                fc = nn.Linear(width, width)
                def forward(x):
                    h = F.relu(fc(x))
                    if h.mean() > model_cfg.threshold:  # data-dependent
                        h = h + 1
                    return h
                model = forward
                return torch.compile(model)(torch.ones(2, 8))
            """
        )
    ]


def test_an_instance_made_inside_a_call_is_replaced_there_by_the_function():
    cand = start(REFINER + "step = torch.compile(Refiner(0.5), fullgraph=True)\nstep(torch.ones(2, 8))\n")
    assert each(FlattenModule(), cand) == [
        HEAD
        + dedent(
            """\
            cfg = 0.5
            width = 8
            fc = nn.Linear(width, width)
            def forward(x):
                h = F.relu(fc(x))
                if h.mean() > cfg.threshold:  # data-dependent
                    h = h + 1
                return h
            step = torch.compile(forward, fullgraph=True)
            step(torch.ones(2, 8))
            """
        )
    ]


def test_no_unit_for_a_class_made_twice_or_per_item_or_with_more_than_init_and_forward():
    twice = REFINER + "a = Refiner(1)\nb = Refiner(2)\n"
    per_item = REFINER + "blocks = nn.ModuleList(Refiner(k) for k in range(3))\n"
    helper = REFINER.replace("    def forward(self, x):", "    def extra(self):\n        return 1\n\n"
                                                          "    def forward(self, x):") + "m = Refiner(1)\n"
    bare_self = REFINER.replace("return h\n", "return h, self\n") + "m = Refiner(1)\n"
    unknown_attr = REFINER.replace("return h\n", "return h if self.training else -h\n") + "m = Refiner(1)\n"
    for src in (twice, per_item, helper, bare_self, unknown_attr):
        assert not FlattenModule().units(start(src), 0), src


def test_a_subclass_of_a_local_base_with_only_init_runs_that_init():
    src = HEAD + dedent(
        """\
        class TinyPreTrainedModel(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config


        class TinyForClassification(TinyPreTrainedModel):
            def forward(self, ids):
                return ids + self.config


        model = TinyForClassification(1)
        model = torch.compile(model, fullgraph=True)
        """
    )
    out = each(FlattenModule(), start(src))
    assert out == [
        HEAD
        + dedent(
            """\
            class TinyPreTrainedModel(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.config = config


            config = 1
            def forward(ids):
                return ids + config
            model = forward
            model = torch.compile(model, fullgraph=True)
            """
        )
    ]
