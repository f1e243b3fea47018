"""strip-decorators (passes/decorators.py): the exact program before and after its units."""

from __future__ import annotations

from shrinkgpu.passes import StripDecorators
from shrinkgpu.syntax import Program


def test_strip_decorators_offers_each_decorator_and_turns_property_reads_into_calls():
    source = (
        "import functools\n"
        "def timed(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def wrapper(*a):\n"
        "        return fn(*a)\n"
        "    return wrapper\n"
        "class Net:\n"
        "    @property\n"
        "    def width(self):\n"
        "        return 3\n"
        "    @timed\n"
        "    def run(self):\n"
        "        return self.width + 1\n"
        "print(Net().run(), Net().width)\n"
    )
    cand = Program({"s.py": source}, "s.py").initial()
    units = StripDecorators().units(cand, 0)
    assert len(units) == 3  # functools.wraps inside timed, property, timed
    everything = StripDecorators().apply(cand, units).files["s.py"]
    assert everything == (
        "import functools\n"
        "def timed(fn):\n"
        "    def wrapper(*a):\n"
        "        return fn(*a)\n"
        "    return wrapper\n"
        "class Net:\n"
        "    def width(self):\n"
        "        return 3\n"
        "    def run(self):\n"
        "        return self.width() + 1\n"
        "print(Net().run(), Net().width())\n"
    )


def test_a_property_that_is_also_assigned_is_left_alone():
    source = "class A:\n    @property\n    def v(self):\n        return 1\nA().v = 2\n"
    assert StripDecorators().units(Program({"s.py": source}, "s.py").initial(), 0) == []


def test_a_dataclass_config_becomes_a_plain_class_with_its_defaults():
    source = (
        "from dataclasses import dataclass, field\n"
        "@dataclass\n"
        "class Data:\n"
        "    batch: int = 32\n"
        "@dataclass\n"
        "class Config:\n"
        "    data: Data = field(default_factory=Data)\n"
        "    lr: float = field(default=0.1)\n"
        "print(Config().data.batch)\n"
    )
    cand = Program({"s.py": source}, "s.py").initial()
    units = StripDecorators().units(cand, 0)
    assert StripDecorators().apply(cand, units).files["s.py"] == (
        "from dataclasses import dataclass, field\n"
        "class Data:\n"
        "    batch: int = 32\n"
        "class Config:\n"
        "    data: Data = Data()\n"
        "    lr: float = 0.1\n"
        "print(Config().data.batch)\n"
    )


REGISTRY = (
    "CONVS = {}\n"
    "def register(registry, name):\n"
    "    def deco(cls):\n"
    "        registry[name] = cls\n"
    "        return cls\n"
    "    return deco\n"
    "def register_conv(name):\n"
    "    return register(CONVS, name)\n"
    "@register(CONVS, 'gcn')\n"
    "class GCN:\n"
    "    pass\n"
    "@register_conv('sage')\n"
    "class Sage:\n"
    "    pass\n"
    "@CONVS.setdefault('gat', None) or (lambda c: c)\n"
    "class Gat:\n"
    "    pass\n"
    "layer = CONVS['gcn']()\n"
    "other = CONVS.get('sage')()\n"
    "OTHER = {'gcn': 1}\n"
    "print(OTHER['gcn'])\n"
)


def test_a_registering_decorator_goes_with_the_registry_reads_under_its_key():
    cand = Program({"s.py": REGISTRY}, "s.py").initial()
    texts = [StripDecorators().apply(cand, [u]).files["s.py"] for u in StripDecorators().units(cand, 0)]
    gcn = next(t for t in texts if "@register(CONVS, 'gcn')" not in t)
    # the registry read under its key is the class; another dict's key of that name is not
    assert "layer = GCN()\n" in gcn and "print(OTHER['gcn'])" in gcn and "other = CONVS.get('sage')()" in gcn
    # a local decorator function whose body names the registry counts too
    sage = next(t for t in texts if "@register_conv('sage')" not in t)
    assert "other = Sage()\n" in sage and "layer = CONVS['gcn']()" in sage
    # a decorator without one string key is removed alone
    gat = next(t for t in texts if "@CONVS.setdefault" not in t)
    assert "layer = CONVS['gcn']()" in gat and "other = CONVS.get('sage')()" in gat


def test_the_static_methods_of_an_autograd_function_stay_static():
    source = (
        "import torch\n"
        "class LSQ(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x\n"
        "    @staticmethod\n"
        "    @torch.no_grad()\n"
        "    def backward(ctx, g):\n"
        "        return g\n"
        "class Plain:\n"
        "    @staticmethod\n"
        "    def make():\n"
        "        return 1\n"
    )
    cand = Program({"s.py": source}, "s.py").initial()
    units = StripDecorators().units(cand, 0)
    # torch.no_grad() on backward and Plain's staticmethod; never LSQ's staticmethods
    assert len(units) == 2
    assert StripDecorators().apply(cand, units).files["s.py"] == source.replace(
        "    @torch.no_grad()\n", "").replace("class Plain:\n    @staticmethod\n", "class Plain:\n")
