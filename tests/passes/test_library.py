"""cut-library (passes/library.py): the library call the first run cut replaces the
code that only fed it.
"""

from __future__ import annotations

from shrinkgpu.passes import CallPastTheLibrary
from shrinkgpu.syntax import CutRecord, Facts, Program


def test_cut_library_replaces_the_library_call_and_deletes_what_only_it_read():
    source = (
        "import torch\n"
        "import framework\n"
        "class Net:\n"
        "    def step(self, batch):\n"
        "        return batch\n"
        "model = Net()\n"
        "loader = framework.Loader(size=8)\n"
        "trainer = framework.Trainer(epochs=1)\n"
        "trainer.fit(model, loader)\n"
    )
    replacement = "import torch\n_call = torch.load('s.call.pt')\nmodel.step(*_call['args'])\n"
    cut = CutRecord("s.py", "trainer.fit(model, loader)", replacement, "Trainer.fit")
    program = Program({"s.py": source}, "s.py", facts=Facts(cut=cut))
    cand = program.initial()
    units = CallPastTheLibrary().units(cand, 0)
    assert len(units) == 1
    # the framework's import goes too: nothing reads it once the trainer and loader are gone
    assert CallPastTheLibrary().apply(cand, [units[0]]).files["s.py"] == (
        "import torch\n"
        "class Net:\n"
        "    def step(self, batch):\n"
        "        return batch\n"
        "model = Net()\n"
        "import torch\n"
        "_call = torch.load('s.call.pt')\n"
        "model.step(*_call['args'])\n"
    )
    assert CallPastTheLibrary().units(cand, 1) is None
    # without the fact, nothing is offered
    assert CallPastTheLibrary().units(Program({"s.py": source}, "s.py").initial(), 0) == []


def test_after_what_never_ran_is_gone_the_cut_drops_the_trainer_it_alone_read():
    from shrinkgpu.passes.never_ran import DeleteNeverRan

    source = (
        "import torch\n"
        "import framework\n"
        "model = torch.nn.Linear(2, 2)\n"
        "trainer = framework.Trainer(epochs=1)\n"
        "trainer.fit(model)\n"
        "trainer.save_model('out')\n"
    )
    replacement = "import torch\n_call = torch.load('s.call.pt')\nmodel(*_call['args'])\n"
    cut = CutRecord("s.py", "trainer.fit(model)", replacement, "Trainer.fit")
    cand = Program({"s.py": source}, "s.py", facts=Facts(cut=cut, stack=(("s.py", 5),))).initial()
    # the trainer is read after the failure too: the cut alone keeps it
    assert "trainer = framework.Trainer" in CallPastTheLibrary().apply(
        cand, CallPastTheLibrary().units(cand, 0)).files["s.py"]
    # with what never ran deleted by an edit of the same candidate, it goes with the cut
    never = cand.with_edits(DeleteNeverRan().units(cand, 0)[0])
    assert CallPastTheLibrary().apply(never, CallPastTheLibrary().units(never, 0)).files["s.py"] == (
        "import torch\n"
        "model = torch.nn.Linear(2, 2)\n"
        "import torch\n"
        "_call = torch.load('s.call.pt')\n"
        "model(*_call['args'])\n"
    )


COLLATE_CALL = "_call = torch.load('s.call.pt')\ncollate(*_call['args'], **_call['kwargs'])\n"


def collate_cut(source: str, header: str):
    """The candidate of ``source`` whose cut replaces ``header``'s statement by the saved
    collate call, and the pass's one unit on it."""
    cut = CutRecord("s.py", header, COLLATE_CALL, "_BaseDataLoaderIter.__next__")
    cand = Program({"s.py": source}, "s.py", facts=Facts(cut=cut)).initial()
    [unit] = CallPastTheLibrary().units(cand, 0)
    return cand, unit


def test_a_loop_whose_header_called_the_library_is_replaced_by_the_call_whole():
    # ``for batch in loader`` made the loader call the user's collate function, which
    # failed: the failing iteration never reached the body, and the loop goes whole.
    source = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "def collate(rows):\n"
        "    return torch.stack(rows)\n"
        "rows = [torch.zeros(3), torch.zeros(2)]\n"
        "loader = DataLoader(rows, batch_size=2, collate_fn=collate)\n"
        "model = torch.nn.Linear(3, 1)\n"
        "for epoch in range(3):\n"
        "    for batch in loader:\n"
        "        loss = model(batch).sum()\n"
        "        loss.backward()\n"
    )
    cand, unit = collate_cut(source, "for batch in loader:")
    # the loader and its rows go with the loop, and the model that only its body read
    assert CallPastTheLibrary().apply(cand, [unit]).files["s.py"] == (
        "import torch\n"
        "def collate(rows):\n"
        "    return torch.stack(rows)\n"
        "for epoch in range(3):\n"
        "    _call = torch.load('s.call.pt')\n"
        "    collate(*_call['args'], **_call['kwargs'])\n"
    )


def test_a_loop_already_cut_to_one_pass_is_replaced_where_it_binds_the_item():
    # A hot loop is cut to its first pass before this pass comes (on a loaded machine even
    # a short one is hot): ``batch = next(iter(loader))`` still makes the loader's call.
    source = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "def collate(rows):\n"
        "    return torch.stack(rows)\n"
        "rows = [torch.zeros(3), torch.zeros(2)]\n"
        "batch = next(iter(DataLoader(rows, batch_size=2, collate_fn=collate)))\n"
        "print(batch.mean())\n"
    )
    header = "for batch in DataLoader(rows, batch_size=2, collate_fn=collate):"
    cand, unit = collate_cut(source, header)
    cut = cand.program.facts.cut
    assert CallPastTheLibrary().apply(cand, [unit]).files["s.py"] == (
        "import torch\n"
        "def collate(rows):\n"
        "    return torch.stack(rows)\n"
        "_call = torch.load('s.call.pt')\n"
        "collate(*_call['args'], **_call['kwargs'])\n"
        "print(batch.mean())\n"
    )
    # a later pass through it too; another loop's item, or another target, is not the call
    later = source.replace("next(iter(DataLoader(rows, batch_size=2, collate_fn=collate)))",
                           "next(itertools.islice(DataLoader(rows, batch_size=2, collate_fn=collate), 3, None))")
    assert CallPastTheLibrary().units(Program({"s.py": later}, "s.py", facts=Facts(cut=cut)).initial(), 0)
    for other in (source.replace("batch = next", "rows2 = next"), source.replace("batch_size=2", "batch_size=1")):
        assert CallPastTheLibrary().units(Program({"s.py": other}, "s.py", facts=Facts(cut=cut)).initial(), 0) == []
