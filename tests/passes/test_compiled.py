"""compiled-forward (passes/compiled.py): ``torch.compile`` of a local module instance
becomes ``torch.compile`` of its forward, written as a function beside the call."""

from __future__ import annotations

from shrinkgpu.passes import CompiledForward

from .helpers import dedent, each, start

NET = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.t = 0.0

    def forward(self, x, scale=1.0):
        h = F.relu(self.fc(x))  # trunk
        if h.mean() > self.t:
            h = h * scale
        return h

"""
# What is left of the class: its forward goes in the same unit
INIT_ONLY = NET[: NET.index("    def forward")].rstrip("\n") + "\n\n"


def test_a_compiled_instance_inside_a_function_becomes_a_compiled_closure_of_its_forward():
    cand = start(
        NET
        + """
def train(cfg):
    model = Net(cfg.d)
    step = torch.compile(model, fullgraph=True) if cfg.compile else model
    return step(torch.randn(2, cfg.d))
"""
    )
    assert each(CompiledForward(), cand) == [
        INIT_ONLY
        + dedent(
            """
            def train(cfg):
                model = Net(cfg.d)
                def forward(x, scale=1.0):
                    h = F.relu(model.fc(x))  # trunk
                    if h.mean() > model.t:
                        h = h * scale
                    return h
                step = torch.compile(forward, fullgraph=True) if cfg.compile else model
                return step(torch.randn(2, cfg.d))
            """
        )
    ]


def test_an_instance_rebound_to_its_compiled_self_is_read_through_another_name():
    # ``net = torch.compile(net)``: a forward reading ``net`` would call itself
    cand = start(NET + "\nnet = Net(4)\nnet = torch.compile(net, backend='eager')\nnet(torch.randn(2, 4))\n")
    assert each(CompiledForward(), cand) == [
        INIT_ONLY
        + dedent(
            """
            net = Net(4)
            module = net
            def forward(x, scale=1.0):
                h = F.relu(module.fc(x))  # trunk
                if h.mean() > module.t:
                    h = h * scale
                return h
            net = torch.compile(forward, backend='eager')
            net(torch.randn(2, 4))
            """
        )
    ]


def test_no_unit_where_the_pasted_forward_would_read_a_local_or_the_class_is_not_a_plain_rewrite():
    shadowing = NET + "\ndef run(F):\n    m = Net(2)\n    c = torch.compile(m)\n    return c(torch.ones(1, 2))\n"
    assert not CompiledForward().units(start(shadowing), 0)
    stateful = dedent(
        """\
        import torch


        class Counter(torch.nn.Module):
            def forward(self, x):
                self.calls = 1  # state on the instance
                return x + 1


        c = Counter()
        f = torch.compile(c)
        f(torch.ones(2))
        """
    )
    assert not CompiledForward().units(start(stateful), 0)
    # not an instance of a local class: nothing to write out
    assert not CompiledForward().units(start("import torch\nm = torch.nn.Linear(2, 2)\nf = torch.compile(m)\n"), 0)


def test_an_instance_made_in_the_compile_call_is_made_first_under_a_name_of_its_own():
    cand = start(NET + "\nfeaturize = torch.compile(Net(4))\nfeaturize(torch.randn(2, 4))\n")
    assert each(CompiledForward(), cand) == [
        INIT_ONLY
        + dedent(
            """
            module = Net(4)
            def forward(x, scale=1.0):
                h = F.relu(module.fc(x))  # trunk
                if h.mean() > module.t:
                    h = h * scale
                return h
            featurize = torch.compile(forward)
            featurize(torch.randn(2, 4))
            """
        )
    ]
