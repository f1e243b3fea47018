"""drop-parameters (passes/parameters.py): parameters nothing reads, with the arguments
that fill them.
"""

from __future__ import annotations

from shrinkgpu.passes import DropParameters
from shrinkgpu.syntax import CutRecord, Facts

from .helpers import after, each, start


def test_drop_parameters_removes_an_unread_parameter_and_the_argument_every_call_passes():
    cand = start("""\
        class Data:
            def __init__(self, n, seed, split="train"):
                self.n = n
        class Block:
            def __init__(self, c, k, pool: bool):
                self.pool = c * k
            @staticmethod
            def windows(series, window, step=6):
                return series
            def run(self, x, verbose=False):
                return self.windows(x, 3)
        d = Data(4, seed=1, split="val")
        b = Block(1, 2, True)
        b.run(5, verbose=True)
        """)
    texts = each(DropParameters(), cand)
    assert len(texts) == 6
    seed, split, pool, window, step, verbose = texts
    assert "def __init__(self, n, split=\"train\"):" in seed and 'Data(4, split="val")' in seed
    assert "def __init__(self, n, seed):" in split and "Data(4, seed=1)" in split
    assert "def __init__(self, c, k):" in pool and "Block(1, 2)" in pool
    # a static method's calls pass every parameter: ``x`` is the first, ``3`` the second
    assert "def windows(series, step=6):" in window and "self.windows(x)" in window
    assert "def windows(series, window):" in step and "self.windows(x, 3)" in step
    assert "def run(self, x):" in verbose and "b.run(5)" in verbose


def test_drop_parameters_keeps_positional_parameters_of_what_a_library_calls():
    cand = start("""\
        def collate(batch, pad_to, extra=None):
            return batch
        class Net:
            def forward(self, x, mask):
                return x
            def __getitem__(self, i):
                return 0
        loader = make_loader(collate_fn=collate)
        """)
    [text] = each(DropParameters(), cand)
    # only the parameter with a default: the loader calls ``collate(batch)`` itself
    assert "def collate(batch, pad_to):" in text and "collate_fn=collate" in text


def test_drop_parameters_leaves_inherited_init_shadowed_names_and_spread_calls():
    cand = start("""\
        class Base:
            def __init__(self, a, unused=0):
                self.a = a
        class Sub(Base):
            pass
        def f(a, b=0):
            return a
        def f2(a, b=0):
            return a
        f2(*args)
        Sub(1, unused=2)
        f(1)
        """)
    [text] = each(DropParameters(), cand)
    assert "def f(a):" in text and "f(1)\n" in text


def test_drop_parameters_renders_the_last_parameter_without_a_dangling_comma():
    cand = start("def f(\n    a,\n    b=1,\n):\n    return a\nf(\n    2,\n    b=3,\n)\n")
    assert after(DropParameters(), cand) == "def f(\n    a,\n):\n    return a\nf(\n    2,\n)\n"


def test_drop_parameters_leaves_the_signatures_the_library_cut_replays():
    src = """\
        class Net:
            def __init__(self, width=4):
                pass
            def _step(self, batch, stage):
                return batch
            def training_step(self, batch, idx):
                return self._step(batch, "train")
        def helper(x, unused=0):
            return x
        trainer.fit(Net())
        helper(1)
        """
    cut = CutRecord(file="a.py", source="trainer.fit(Net())", replacement="Net()._step(*load('a.call.pt')['args'])")
    texts = each(DropParameters(), start(src, Facts(cut=cut)))
    # without the record ``stage`` and ``width`` go too; with it only ``helper``'s parameter
    assert len(each(DropParameters(), start(src))) == 3
    assert len(texts) == 1 and "def helper(x):" in texts[0]


def test_a_replayed_function_that_reads_none_of_its_parameters_loses_them_all_with_the_saved_arguments():
    src = """\
        import torch
        def collate(batch, pad=0):
            torch.where(torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 4), -100)
        class Net:
            def _step(self, batch, stage):
                return batch
        _call = torch.load('a.call.pt')
        collate(*_call['args'], **_call['kwargs'])
        """
    cut = CutRecord(file="a.py", source="for b in loader: pass",
                    replacement="collate(*_call['args'], **_call['kwargs'])")
    texts = each(DropParameters(), start(src, Facts(cut=cut)))
    assert len(texts) == 1
    assert "def collate():\n" in texts[0] and texts[0].endswith("collate()\n")
    # a parameter still read keeps the saved call whole (``_step`` reads ``batch``)
    cut = CutRecord(file="a.py", source="trainer.fit(Net())", replacement="Net()._step(*_call['args'])")
    src = src.replace("collate(*_call['args'], **_call['kwargs'])", "Net()._step(*_call['args'])")
    assert [t for t in each(DropParameters(), start(src, Facts(cut=cut))) if "def _step" not in t
            or "_step()" in t] == []
