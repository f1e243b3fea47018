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
