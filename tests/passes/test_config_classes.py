"""config-class-values (passes/config_classes.py): a class that only holds values, made
once without arguments, is read as its values."""

from __future__ import annotations

from shrinkgpu.passes import PASSES, ConfigClassValues

from .helpers import after, dedent, start

NESTED = """\
import torch


class ModelConfig:
    refine_threshold = 0
    hidden: int = 32


class TrainConfig:
    \"\"\"What a run takes.\"\"\"
    model = ModelConfig()
    lr = 1e-3


cfg = TrainConfig()
torch.manual_seed(0)
cfg = cfg.model


def forward(x):
    if x > cfg.refine_threshold:
        return x * cfg.hidden
"""


def test_an_instance_read_only_through_attributes_is_read_as_the_class_values_round_by_round():
    first = after(ConfigClassValues(), start(NESTED))
    # the class nothing reads any more goes with the instance
    assert first == dedent("""\
        import torch


        class ModelConfig:
            refine_threshold = 0
            hidden: int = 32
        torch.manual_seed(0)
        cfg = ModelConfig()


        def forward(x):
            if x > cfg.refine_threshold:
                return x * cfg.hidden
        """)
    assert after(ConfigClassValues(), start(first)) == dedent("""\
        import torch
        torch.manual_seed(0)


        def forward(x):
            if x > 0:
                return x * 32
        """)


def test_a_dataclass_with_defaults_counts_and_other_classes_and_uses_do_not():
    dataclass = dedent("""\
        from dataclasses import dataclass


        @dataclass(frozen=True)
        class Config:
            lr: float = 0.1
            steps: int = 3


        cfg = Config()
        opt(lr=cfg.lr)
        """)
    assert after(ConfigClassValues(), start(dataclass)).endswith("    steps: int = 3\nopt(lr=0.1)\n")
    refused = {
        "a method": "class C:\n    lr = 1\n    def f(self):\n        return 2\n\n\nc = C()\nprint(c.lr)\n",
        "a base": "class C(Base):\n    lr = 1\n\n\nc = C()\nprint(c.lr)\n",
        "built with arguments": "class C:\n    lr = 1\n\n\nc = C(2)\nprint(c.lr)\n",
        "used whole": "class C:\n    lr = 1\n\n\nc = C()\nprint(c.lr, c)\n",
        "an attribute set": "class C:\n    lr = 1\n\n\nc = C()\nc.lr = 2\nprint(c.lr)\n",
        "a computed value": "class C:\n    lr = base * 2\n\n\nc = C()\nprint(c.lr)\n",
        "an attribute it lacks": "class C:\n    lr = 1\n\n\nc = C()\nprint(c.steps)\n",
    }
    for why, src in refused.items():
        assert ConfigClassValues().units(start(src), 0) == [], why


def test_it_is_registered_beside_scalarize_attributes():
    names = [p.name for tier in PASSES for p in tier]
    assert names.index("config-class-values") == names.index("scalarize-attributes") + 1
