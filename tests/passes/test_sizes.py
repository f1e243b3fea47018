"""observed-sizes (passes/sizes.py): the exact program before and after its units."""

from __future__ import annotations

from shrinkgpu.passes import ObservedSizes
from shrinkgpu.syntax import Facts, SizeRecord

from .helpers import dedent, each, start

SRC = """\
import torch


def to_tensor(pairs):
    return torch.tensor(pairs), len(pairs)


def main():
    pairs = [[1, 2], [3, 4], [5, 6]]
    vocab = sorted({t for p in pairs for t in p})
    xtr, n = to_tensor(pairs)
    max_len = xtr.size(1)
    emb = torch.nn.Embedding(len(vocab), 8)
    emb(torch.full((2, max_len), len(vocab)))


main()
"""


def sizes(*records):
    return Facts(sizes=tuple(SizeRecord("a.py", fn, e, lit) for fn, e, lit in records))


def test_a_size_read_becomes_the_number_and_the_object_read_only_there_goes_with_it():
    cand = start(SRC, sizes(("main", "xtr.size(1)", "2"), ("main", "len(vocab)", "6")))
    got = each(ObservedSizes(), cand)
    # xtr.size(1): ``xtr, n = ...`` is read nowhere else (``n`` is never read), so one unit
    # deletes it, and the helper only it called; another keeps it (building it may be
    # what the bug needs)
    assert got[0] == dedent(
        """\
        import torch


        def main():
            pairs = [[1, 2], [3, 4], [5, 6]]
            vocab = sorted({t for p in pairs for t in p})
            max_len = 2
            emb = torch.nn.Embedding(len(vocab), 8)
            emb(torch.full((2, max_len), len(vocab)))


        main()
        """
    )
    assert "    xtr, n = to_tensor(pairs)\n    max_len = 2\n" in got[1]
    # len(vocab): every occurrence in the function at once; the vocabulary goes, and
    # ``pairs`` is still read by ``to_tensor(pairs)``
    assert got[2] == dedent(
        """\
        import torch


        def to_tensor(pairs):
            return torch.tensor(pairs), len(pairs)


        def main():
            pairs = [[1, 2], [3, 4], [5, 6]]
            xtr, n = to_tensor(pairs)
            max_len = xtr.size(1)
            emb = torch.nn.Embedding(6, 8)
            emb(torch.full((2, max_len), 6))


        main()
        """
    )
    assert len(got) == 4


def test_only_in_the_function_the_frame_ran():
    # recorded in ``main``; ``to_tensor``'s own ``len(pairs)`` is another read
    cand = start(SRC, sizes(("to_tensor", "len(vocab)", "6"), ("main", "len(pairs)", "3")))
    assert ObservedSizes().units(cand, 0) == []


def test_a_name_rebound_in_its_scope_is_left():
    src = """\
    import torch


    def forward(x):
        n = x.size(0)
        x = x.view(-1)
        return x[: x.size(0) + n]
    """
    # at the failure ``x`` is the view: its size is not what the first read saw
    cand = start(src, sizes(("forward", "x.size(0)", "12")))
    assert ObservedSizes().units(cand, 0) == []


def test_methods_are_matched_by_their_qualified_name_and_comprehensions_are_left():
    src = """\
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, data):
            super().__init__()
            self.fc = nn.Linear(data.shape[1], 2)
            self.rows = [len(r) for r in data]


    net = Net(load())
    """
    cand = start(src, sizes(("Net.__init__", "data.shape[1]", "5"), ("Net.__init__", "len(r)", "5")))
    assert each(ObservedSizes(), cand) == [
        dedent(
            """\
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self, data):
                    super().__init__()
                    self.fc = nn.Linear(5, 2)
                    self.rows = [len(r) for r in data]


            net = Net(load())
            """
        )
    ]


def test_nothing_without_records():
    assert ObservedSizes().units(start(SRC), 0) == []


def test_a_batch_unpacked_from_the_loader_becomes_tensors_of_its_layout():
    src = """\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    def main():
        data = TensorDataset(torch.load("x.pt"), torch.load("y.pt"))
        step, (x, y) = next(enumerate(DataLoader(data, batch_size=64)))
        conv = torch.nn.Conv1d(3, 32, 5)
        conv(x)
    """
    facts = Facts(sizes=(
        SizeRecord("a.py", "main", "step", "0"),
        SizeRecord("a.py", "main", "x", "torch.randn(64, 4, 128)", "tensor"),
        SizeRecord("a.py", "main", "y", "torch.zeros(64, dtype=torch.int64)", "tensor"),
    ))
    got = each(ObservedSizes(), start(src, facts))
    assert got[0] == dedent(
        """\
        import torch


        def main():
            step, (x, y) = (0, (torch.randn(64, 4, 128), torch.zeros(64, dtype=torch.int64)))
            conv = torch.nn.Conv1d(3, 32, 5)
            conv(x)
        """
    )
    assert len(got) == 2 and "data = TensorDataset(" in got[1]


def test_a_target_with_a_name_the_run_did_not_record_is_left():
    src = """\
    import torch


    def main():
        x, model = torch.load("x.pt"), torch.nn.Linear(3, 3)
        model(x)
    """
    facts = Facts(sizes=(SizeRecord("a.py", "main", "x", "torch.randn(4, 5)", "tensor"),))
    assert ObservedSizes().units(start(src, facts), 0) == []


INLINED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.load("x.pt")), batch_size=64)
    conv = torch.nn.Conv1d(3, 32, 5)
    step, (x,) = next(enumerate(loader))
    conv(x)


main()
"""


def test_a_record_of_a_function_since_inlined_is_looked_for_where_its_body_went():
    # ``run_epoch(loader, conv)`` ran the failing frame; inline-calls has put its body in
    # ``main``, with its names
    facts = Facts(sizes=(
        SizeRecord("a.py", "run_epoch", "step", "0"),
        SizeRecord("a.py", "run_epoch", "x", "torch.randn(64, 4, 128)", "tensor"),
    ))
    got = each(ObservedSizes(), start(INLINED, facts))
    assert got[0] == dedent(
        """\
        import torch


        def main():
            conv = torch.nn.Conv1d(3, 32, 5)
            step, (x,) = (0, (torch.randn(64, 4, 128),))
            conv(x)


        main()
        """
    )
    assert len(got) == 2 and "    loader = DataLoader(" in got[1]


def test_records_of_functions_still_there_or_disagreeing_are_not_looked_for_elsewhere():
    still_there = INLINED + "\n\ndef run_epoch(loader):\n    return len(loader)\n"
    facts = Facts(sizes=(SizeRecord("a.py", "run_epoch", "x", "torch.randn(64, 4, 128)", "tensor"),
                         SizeRecord("a.py", "run_epoch", "step", "0")))
    assert ObservedSizes().units(start(still_there, facts), 0) == []
    # two functions, both gone, saw ``x`` with different shapes: neither is offered
    facts = Facts(sizes=(
        SizeRecord("a.py", "train_epoch", "step", "0"),
        SizeRecord("a.py", "train_epoch", "x", "torch.randn(64, 4, 128)", "tensor"),
        SizeRecord("a.py", "eval_epoch", "x", "torch.randn(8, 4, 128)", "tensor"),
    ))
    assert ObservedSizes().units(start(INLINED, facts), 0) == []


def test_a_configuration_value_becomes_its_literal_and_the_configuration_goes_once_nothing_else_reads_it():
    src = dedent(
        """\
        import yaml
        from dataclasses import dataclass


        @dataclass
        class Data:
            n_train: int
            n_features: int


        raw = yaml.safe_load(open("c.yaml"))
        data = Data(**raw["data"])
        data.n_train = 8
        x = rng.uniform(-1, 1, size=(data.n_train, data.n_features))
        """
    )
    facts = Facts(sizes=(SizeRecord("a.py", "<module>", "data.n_features", "14", "setting"),))
    got = each(ObservedSizes(), start(src, facts))
    # every read of the value becomes it; the assignment to another field is no read;
    # ``data`` is still read (``data.n_train``), so it stays
    assert [g for g in got if "size=(data.n_train, 14)" in g] and all("14 = " not in g for g in got)
    assert all("data = Data(" in g for g in got)
    # once the last read goes, the object goes in the same unit (the search deletes the
    # load it was built from); another unit keeps it
    src = src.replace("data.n_train = 8\n", "").replace("size=(data.n_train, ", "size=(8, ")
    got = each(ObservedSizes(), start(src, facts))
    assert got[0].endswith('raw = yaml.safe_load(open("c.yaml"))\nx = rng.uniform(-1, 1, size=(8, 14))\n')
    assert got[1].endswith('data = Data(**raw["data"])\nx = rng.uniform(-1, 1, size=(8, 14))\n')
