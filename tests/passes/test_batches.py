"""first-batch (passes/batches.py): the exact program before and after its units, and
that the batch it writes is the batch the loader gave.
"""

from __future__ import annotations

from shrinkgpu.passes import FirstBatch
from shrinkgpu.passes.batches import _collated
from shrinkgpu.syntax.code import parse_expression

from .helpers import after, dedent, each, start

FIRST_BATCH_SRC = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Windows(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 3, 8)
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        rec = self.x[idx]
        return rec.flip(-1), self.labels[idx]


ds = Windows(24)
dl = DataLoader(ds, batch_size=16, num_workers=0)
x, y = next(iter(dl))
"""


def test_first_batch_replaces_the_loader_by_slices_of_the_dataset_fields():
    cand = start(FIRST_BATCH_SRC)
    out = after(FirstBatch(), cand)
    # The loader was the only reader of the dataset: its item methods go with it.
    assert out == dedent(
        """\
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Windows(Dataset):
            def __init__(self, n):
                self.x = torch.randn(n, 3, 8)
                self.labels = torch.randint(0, 2, (n,))


        ds = Windows(24)
        x, y = (ds.x[:16].flip(-1), ds.labels[:16])
        """
    )


def test_first_batch_slices_have_the_dtype_shape_and_strides_of_the_collated_batch():
    import torch

    before, after_ = {}, {}
    torch.manual_seed(0)
    exec(FIRST_BATCH_SRC, before)
    torch.manual_seed(0)
    exec(after(FirstBatch(), start(FIRST_BATCH_SRC)), after_)
    for name in ("x", "y"):
        a, b = before[name], after_[name]
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
        assert torch.equal(a, b)


def test_first_batch_of_enumerate_and_of_a_tensor_dataset():
    cand = start(
        """\
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(a, b), 8)
        step, (x, y) = next(enumerate(loader))
        """
    )
    assert after(FirstBatch(), cand) == dedent(
        """\
        step, (x, y) = (0, (a[:8], b[:8]))
        """
    )


def test_first_batch_leaves_shuffled_sampled_or_collated_loaders_and_other_items_alone():
    for loader in (
        "DataLoader(TensorDataset(a), batch_size=4, shuffle=True)",
        "DataLoader(TensorDataset(a), 4, True)",
        "DataLoader(TensorDataset(a), batch_size=4, sampler=s)",
        "DataLoader(TensorDataset(a), batch_size=None)",
    ):
        cand = start(f"loader = {loader}\nx = next(iter(loader))\n")
        assert FirstBatch().units(cand, 0) == [], loader
    # an item that is not rows of the dataset's fields
    for item in ("return self.rows[i]['x']", "return self.x[i], i", "return f(i)"):
        src = (f"class D:\n    def __getitem__(self, i):\n        {item}\n\nds = D()\nloader = DataLoader(ds, 4)\n"
               f"x = next(iter(loader))\n")
        assert FirstBatch().units(start(src), 0) == [], item


RECORDS_SRC = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, n):
        self.rows = [{"emb": torch.randn(4), "label": k % 3, "id": f"r{k}"} for k in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        return row["emb"], row["label"]


ds = Rows(10)
loader = DataLoader(ds, batch_size=4)
emb, label = next(iter(loader))
"""


def test_first_batch_of_a_record_dataset_collates_each_part_one_guess_per_level():
    cand = start(RECORDS_SRC)
    guesses = [each(FirstBatch(), cand, level) for level in range(3)]
    head = RECORDS_SRC.split("    def __len__")[0].rstrip() + "\n\n\nds = Rows(10)\n"
    # stack-the-tensors first (nothing in ``row["label"]`` says it is a number) ...
    assert guesses[0] == [
        head + 'emb, label = (torch.stack([ds.rows[i]["emb"] for i in range(4)]), '
        'torch.stack([ds.rows[i]["label"] for i in range(4)]))\n'
    ]
    # ... then one part at a time changed to its next kind, the last part first
    assert guesses[1] == [
        head + 'emb, label = (torch.stack([ds.rows[i]["emb"] for i in range(4)]), '
        'torch.tensor([ds.rows[i]["label"] for i in range(4)]))\n'
    ]
    assert guesses[2] == [
        head + 'emb, label = (torch.tensor([ds.rows[i]["emb"] for i in range(4)]), '
        'torch.stack([ds.rows[i]["label"] for i in range(4)]))\n'
    ]
    # the guess that matches default_collate gives the loader's batch exactly
    before, after_ = {}, {}
    torch_ = __import__("torch")
    torch_.manual_seed(0)
    exec(RECORDS_SRC, before)
    torch_.manual_seed(0)
    exec(guesses[1][0], after_)
    for name in ("emb", "label"):
        a, b = before[name], after_[name]
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()) and torch_.equal(a, b)
    # levels end when the guesses do
    assert FirstBatch().units(cand, 8) is None


def test_first_batch_guesses_follow_what_the_source_says_about_a_part():
    def first(item):
        return _collated(parse_expression(item), "i", "2")[0]

    assert first("(self.x[i], int(self.y[i]))") == (
        "(torch.stack([self.x[i] for i in range(2)]), torch.tensor([int(self.y[i]) for i in range(2)]))"
    )
    assert first("{'path': str(p[i]), 'w': float(w[i])}") == (
        "{'path': [str(p[i]) for i in range(2)], 'w': torch.tensor([float(w[i]) for i in range(2)], "
        "dtype=torch.float64)}"
    )
    assert first("tf(paths[i])") == "torch.stack([tf(paths[i]) for i in range(2)])"


def test_first_batch_with_a_collate_function_is_the_function_of_the_first_items():
    cand = start("items = [a, b, c]\nloader = DataLoader(items, batch_size=2, collate_fn=pad)\n"
                 "x, n = next(iter(loader))\n")
    assert after(FirstBatch(), cand) == "items = [a, b, c]\nx, n = pad(items[:2])\n"
    # any other dataset: no unit (see the pass)
    src = "ds = D()\nloader = DataLoader(ds, batch_size=16, collate_fn=pad)\nx, n = next(iter(loader))\n"
    assert FirstBatch().units(start(src), 0) == []
