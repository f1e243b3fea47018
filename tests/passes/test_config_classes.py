"""config-class-values (passes/config_classes.py): a class that only holds values, made
once without arguments, is read as its values."""

from __future__ import annotations

from shrinkgpu.passes import PASSES, ConfigClassValues

from .helpers import after, dedent, each, start

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


HANDED_ON = """\
import torch.nn as nn


class ModelConfig:
    channels = 16
    window: int = 96


class Net(nn.Module):
    def __init__(self, mcfg):
        super().__init__()
        self.mcfg = mcfg
        self.fc = nn.Linear(mcfg.channels, 4)

    def flat(self, x):
        return x.view(-1, self.mcfg.channels * self.mcfg.window)


net = Net(ModelConfig())
"""


def test_an_instance_handed_on_as_an_argument_is_read_as_its_values_one_unit_per_path():
    texts = each(ConfigClassValues(), start(HANDED_ON))
    assert len(texts) == 3, texts  # mcfg.channels; self.mcfg.channels; self.mcfg.window
    assert "self.fc = nn.Linear(16, 4)" in texts[0] and "self.mcfg.channels" in texts[0]
    assert "x.view(-1, 16 * self.mcfg.window)" in texts[1]
    assert "x.view(-1, self.mcfg.channels * 96)" in texts[2]
    # all of them together leave the instance unread but for the line that keeps it
    everything = after(ConfigClassValues(), start(HANDED_ON))
    assert "self.fc = nn.Linear(16, 4)" in everything and "x.view(-1, 16 * 96)" in everything


def test_an_instance_handed_on_keeps_its_reads_where_its_values_may_not_be_the_class_values():
    refused = {
        "built with arguments once": HANDED_ON + "other = Net(ModelConfig(channels=3))\n",
        "an attribute set by name": HANDED_ON + "setattr(net.mcfg, 'channels', 8)\n",
        "an attribute set on some object": HANDED_ON + "net.mcfg.window = 8\nnet.mcfg.channels = 8\n",
        "filled in by a parser": HANDED_ON + "parser.parse_args(namespace=net.mcfg)\n",
        "the class handed on itself": HANDED_ON + "build(ModelConfig)\n",
        "another class binds the names": HANDED_ON + "class Other:\n    channels = 3\n    window = 4\n",
    }
    for why, src in refused.items():
        assert ConfigClassValues().units(start(src), 0) == [], why
    # A module's attribute of the same name is no read of the instance.
    numpy_too = HANDED_ON.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport np\n") + "np.window\n"
    assert all("np.window\n" in t for t in each(ConfigClassValues(), start(numpy_too)))
