"""inline-modules and drop-files (passes/files.py): the exact program before and after
their units.
"""

from __future__ import annotations

from shrinkgpu.passes import DropFiles, InlineModules

from .helpers import after, start

MAIN = """\
import torch
import heads
from layers import Block, make as build

net = build(Block(4))
out = heads.classify(net)
"""


HEADS = """\
import torch

WIDTH = 3


def classify(net):
    return net(torch.ones(WIDTH))
"""


LAYERS = """\
class Block:
    def __init__(self, n):
        self.n = n


def make(block):
    return block
"""


def test_inline_modules_pastes_each_local_module_in_place_of_its_import():
    cand = start(MAIN, heads=HEADS, layers=LAYERS)
    done = InlineModules().apply(cand, InlineModules().units(cand, 0))
    assert done.files == {
        "a.py": "import torch\n" + HEADS + LAYERS + "build = make\n\nnet = build(Block(4))\nout = classify(net)\n"
    }


def test_drop_files_offers_every_file_but_the_main_one():
    cand = start(MAIN, heads=HEADS, layers=LAYERS)
    assert [u[0].file for u in DropFiles().units(cand, 0)] == ["heads.py", "layers.py"]
    assert after(DropFiles(), cand) == MAIN
    assert DropFiles().apply(cand, DropFiles().units(cand, 0)).files == {"a.py": MAIN}
    inlined = InlineModules().apply(cand, InlineModules().units(cand, 0))
    assert DropFiles().units(inlined, 0) == []  # inlined files are gone already
    assert InlineModules().units(inlined, 0) == []
