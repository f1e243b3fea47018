"""Exact before/after programs for the passes added after test_passes.py was written:
loops, attribute scalarisation, constructor and list-backed dataset inlining, constant
folding, nn.Sequential cutting."""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes import FirstBatch, InlineCalls, PruneImports, LoopToFailingIteration, LoopToFirstIteration, ScalarizeAttributes, SimplifyExpressions, WhileToBody
from shrinkgpu.passes.expressions import fold

from test_passes import after, dedent, each, start
from shrinkgpu.syntax import Facts


def test_loop_to_first_iteration_binds_the_first_item():
    cand = start(
        """\
        for epoch in range(1, 5):
            for x, y in loader:
                h = model(x)
        """
    )
    assert each(LoopToFirstIteration(), cand) == [
        dedent(
            """\
            epoch = 1
            for x, y in loader:
                h = model(x)
            """
        ),
        dedent(
            """\
            for epoch in range(1, 5):
                x, y = next(iter(loader))
                h = model(x)
            """
        ),
    ]


def test_loop_to_first_iteration_leaves_loops_with_break_else_or_async_alone():
    for src in (
        "for x in xs:\n    if x:\n        break\n    f(x)\n",
        "for x in xs:\n    continue\n",
        "for x in xs:\n    f(x)\nelse:\n    g()\n",
    ):
        assert LoopToFirstIteration().units(start(src), 0) == []
    # a break that belongs to an inner loop is fine
    cand = start("for x in xs:\n    for y in x:\n        break\n")
    assert after(LoopToFirstIteration(), cand) == "x = next(iter(xs))\nfor y in x:\n    break\n"


def test_while_to_body_runs_the_body_once():
    cand = start("i = 0\nwhile i < 10:\n    step(i)\n    i += 1\n")
    assert after(WhileToBody(), cand) == "i = 0\nstep(i)\ni += 1\n"
    assert WhileToBody().units(start("while True:\n    if done():\n        break\n"), 0) == []


def test_scalarize_attributes_of_an_object_used_only_through_them():
    cand = start(
        """\
        import torch.nn as nn
        model = nn.Module()
        model.fc = nn.Linear(4, 2)
        out = model.fc(x)
        """
    )
    assert after(ScalarizeAttributes(), cand) == dedent(
        """\
        import torch.nn as nn
        fc = nn.Linear(4, 2)
        out = fc(x)
        """
    )


def test_scalarize_attributes_leaves_objects_that_are_used_whole_or_collide():
    used_whole = "import torch.nn as nn\nm = nn.Module()\nm.fc = nn.Linear(4, 2)\nopt(m)\n"
    collides = "import torch.nn as nn\nfc = 1\nm_fc = 2\nm = nn.Module()\nm.fc = nn.Linear(4, 2)\nm.fc(x)\n"
    with_args = "m = Box(3)\nm.fc = 1\nprint(m.fc)\n"
    for src in (used_whole, collides, with_args):
        assert ScalarizeAttributes().units(start(src), 0) == []


def test_scalarize_attributes_prefixes_a_name_the_program_already_uses():
    cand = start("ds = Dataset()\nds.x = f()\nds.y = g()\nx, y = ds.x[:4], ds.y[:4]\n")
    assert after(ScalarizeAttributes(), cand) == "ds_x = f()\nds_y = g()\nx, y = ds_x[:4], ds_y[:4]\n"


def test_inline_a_constructor_of_a_class_with_only_init_left():
    cand = start(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, d, hidden, unused=3):
                super().__init__()
                self.fc = nn.Linear(d, hidden)


        model = Net(4, 8)
        out = model.fc(x)
        """
    )
    # (the blank lines that separated the class stay: they belong to the next statement)
    assert after(InlineCalls(), cand) == dedent(
        """\
        import torch.nn as nn


        model = nn.Module()
        self = model
        d = 4
        hidden = 8
        self.fc = nn.Linear(d, hidden)
        out = model.fc(x)
        """
    )


def test_inline_a_list_backed_dataset_as_its_list():
    cand = start(
        """\
        from torch.utils.data import DataLoader, Dataset


        class Items(Dataset):
            def __init__(self, pairs):
                self.items = [(t, y) for t, y in pairs]

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return self.items[i]


        ds = Items(data)
        loader = DataLoader(ds, batch_size=2)
        """
    )
    # ``Dataset`` stays imported: the line also binds ``DataLoader``.
    assert after(InlineCalls(), cand) == dedent(
        """\
        from torch.utils.data import DataLoader, Dataset


        pairs = data
        ds = [(t, y) for t, y in pairs]
        loader = DataLoader(ds, batch_size=2)
        """
    )


def test_a_dataset_that_does_more_than_index_a_list_is_not_a_list():
    cand = start(
        """\
        class Items:
            def __init__(self, pairs):
                self.items = list(pairs)

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return self.items[i] * 2


        ds = Items(data)
        """
    )
    assert InlineCalls().units(cand, 0) == []


def test_fold_evaluates_only_literal_arithmetic():
    assert fold(cst.parse_expression("16 + 1")) == "17"
    assert fold(cst.parse_expression("0 != 0")) == "False"
    assert fold(cst.parse_expression("len(['a', 'b', 'c'])")) == "3"
    for text in ("x + 1", "2 ** 100", "f(1) + 2", "1.0 / 3", "7"):
        assert fold(cst.parse_expression(text)) is None, text


def test_sequential_is_cut_to_the_layers_that_matter():
    src = "import torch.nn as nn\nnet = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
    changed = [t for t in each(SimplifyExpressions(), start(src)) if "Sequential(nn.Linear(4, 8), nn.Linear(8, 2))" in t]
    assert changed == ["import torch.nn as nn\nnet = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n"]


def test_an_unread_assignment_keeps_its_call_and_loses_its_name():
    cand = start("import random\nlabel = random.randint(0, 1)\nx = f()\nprint(x)\n")
    outs = each(SimplifyExpressions(), cand)
    assert "import random\nrandom.randint(0, 1)\nx = f()\nprint(x)\n" in outs
    assert not any(o.endswith("f()\nprint(x)\n") and "x = f()" not in o for o in outs)


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
        src = f"class D:\n    def __getitem__(self, i):\n        {item}\n\nds = D()\nloader = DataLoader(ds, 4)\nx = next(iter(loader))\n"
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
    from shrinkgpu.passes.batches import _collated
    from shrinkgpu.syntax.program import parse_expression

    first = lambda item: _collated(parse_expression(item), "i", "2")[0]
    assert first("(self.x[i], int(self.y[i]))") == (
        "(torch.stack([self.x[i] for i in range(2)]), torch.tensor([int(self.y[i]) for i in range(2)]))"
    )
    assert first("{'path': str(p[i]), 'w': float(w[i])}") == (
        "{'path': [str(p[i]) for i in range(2)], 'w': torch.tensor([float(w[i]) for i in range(2)], dtype=torch.float64)}"
    )
    assert first("tf(paths[i])") == "torch.stack([tf(paths[i]) for i in range(2)])"


def test_prune_imports_removes_the_names_nothing_reads():
    cases = {
        "from torch.utils.data import DataLoader, Dataset\nclass A(Dataset): pass\n":
            "from torch.utils.data import Dataset\nclass A(Dataset): pass\n",
        "from torch.utils.data import (\n    Dataset,\n    DataLoader,\n)\nclass A(Dataset): pass\n":
            "from torch.utils.data import (\n    Dataset,\n)\nclass A(Dataset): pass\n",
        "import os, sys\nsys.exit(0)\n": "import sys\nsys.exit(0)\n",
        "from a import b as c, d, e\nprint(c)\n": "from a import b as c\nprint(c)\n",
    }
    for before, expected in cases.items():
        assert each(PruneImports(), start(before)) == [expected]
    # a single name is statement deletion's business; __future__ is never touched
    assert PruneImports().units(start("import os\n"), 0) == []
    assert PruneImports().units(start("from __future__ import annotations, division\n"), 0) == []


def test_simplify_expressions_lifts_an_operand_out_of_an_operation():
    cand = start("import torch\nx = 0 + 0.3 * torch.randn(4, 3)\nx.view(-1)\n")
    outs = [each(SimplifyExpressions(), cand, level) for level in range(3)]
    flat = [o for level in outs for o in level]
    assert "import torch\nx = 0.3 * torch.randn(4, 3)\nx.view(-1)\n" in flat
    assert "import torch\nx = 0 + torch.randn(4, 3)\nx.view(-1)\n" in flat


def test_simplify_expressions_splits_a_tuple_assignment_with_unread_names():
    cand = start("x, y = a[:16], b[:16]\nwin, n = x.view(3, 4), 5\nprint(x)\n")
    flat = each(SimplifyExpressions(), cand, 0)
    assert "x = a[:16]\nwin, n = x.view(3, 4), 5\nprint(x)\n" in flat
    assert "x, y = a[:16], b[:16]\nx.view(3, 4)\nprint(x)\n" in flat
    # a name assigned to itself is no assignment
    cand = start("pts, t = pts, tensor(xs)\nf(pts, t)\n")
    assert "t = tensor(xs)\nf(pts, t)\n" in each(SimplifyExpressions(), cand, 0)
    # reading one's own old value is fine; a swap is not two assignments
    cand = start("t, n, labels = padded, 0, labels\nf(t)\n")
    assert "t = padded\nf(t)\n" in each(SimplifyExpressions(), cand, 0)
    swap = start("a, b, c = b, a, 0\nf(a, b)\n")
    assert not any(o.startswith("a = b") for o in each(SimplifyExpressions(), swap, 0))


def test_first_batch_with_a_collate_function_is_the_function_of_the_first_items():
    cand = start("items = [a, b, c]\nloader = DataLoader(items, batch_size=2, collate_fn=pad)\nx, n = next(iter(loader))\n")
    assert after(FirstBatch(), cand) == "items = [a, b, c]\nx, n = pad(items[:2])\n"
    # any other dataset: no unit (see the pass)
    src = "ds = D()\nloader = DataLoader(ds, batch_size=16, collate_fn=pad)\nx, n = next(iter(loader))\n"
    assert FirstBatch().units(start(src), 0) == []


LOOPS_SRC = """\
import torch

data = [torch.arange(3) for _ in range(6)]
table = torch.zeros(4)
for epoch in range(1, 3):
    for step, x in enumerate(loader):
        for y in data:
            table[x + y]
"""


def test_loop_to_the_failing_iteration_the_original_run_counted():
    facts = Facts(loops=(
        ("a.py", "for epoch in range(1, 3):", 1),
        ("a.py", "for step, x in enumerate(loader):", 3),
        ("a.py", "for y in data:", 4),
    ))
    cand = start(LOOPS_SRC, facts)
    outs = each(LoopToFailingIteration(), cand)
    head = "import torch\n\ndata = [torch.arange(3) for _ in range(6)]\ntable = torch.zeros(4)\n"
    assert outs == [
        head + "epoch = 2\nfor step, x in enumerate(loader):\n    for y in data:\n        table[x + y]\n",
        head + "for epoch in range(1, 3):\n    import itertools\n    step, x = (3, next(itertools.islice(loader, 3, None)))\n"
        "    for y in data:\n        table[x + y]\n",
        head + "for epoch in range(1, 3):\n    for step, x in enumerate(loader):\n        y = data[4]\n        table[x + y]\n",
    ]
    # without counted iterations (or at iteration 0) there is no level-1 unit
    assert LoopToFailingIteration().units(start(LOOPS_SRC), 0) == []


def test_loop_facts_name_loops_by_header_text_and_skip_ambiguous_ones():
    from shrinkgpu.syntax.program import loop_facts

    files = {"a.py": LOOPS_SRC}
    facts = loop_facts(files, [("a.py", 5, 1), ("a.py", 7, 4), ("b.py", 1, 2)])
    assert facts == (("a.py", "for epoch in range(1, 3):", 1), ("a.py", "for y in data:", 4))
    twice = LOOPS_SRC + "for y in data:\n    pass\n"
    program = start(twice, Facts(loops=facts)).program
    assert {program.stmt_code(s).strip().splitlines()[0]: k for s, k in program.loop_iterations.items()} == {
        "for epoch in range(1, 3):": 1  # "for y in data:" occurs twice now
    }


def test_simplify_expressions_takes_the_one_element_of_a_wrapped_list():
    cand = start("train_set = ConcatDataset([vendor])\nloader = DataLoader(train_set)\n")
    assert "train_set = vendor\nloader = DataLoader(train_set)\n" in each(SimplifyExpressions(), cand, 0) + each(
        SimplifyExpressions(), cand, 1
    )


def test_inline_a_forward_whose_call_heads_a_subscript_or_method_chain():
    cand = start(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            def forward(self, ids, mask):
                h = self.emb(ids)
                return self.head(h)


        model = Net()
        logits = model(ids, mask)[:, :-1].float()
        """
    )
    assert each(InlineCalls(), cand) == [dedent(
        """\
        import torch.nn as nn


        class Net(nn.Module):
            pass


        model = Net()
        self = model
        h = self.emb(ids)
        logits = self.head(h)[:, :-1].float()
        """
    )]
    # an index that reads a name the body could rebind stays out
    cand = start("def f(x):\n    k = 1\n    return x\n\ny = f(a)[k]\n")
    assert InlineCalls().units(cand, 0) == []


def test_inlining_keeps_a_parameter_that_only_an_indented_statement_reads():
    cand = start("def make(n, rng):\n    out = []\n    for _ in range(n):\n        out.append(rng())\n    return out\n\n\npts = make(750, rng)\n")
    assert each(InlineCalls(), cand) == [
        "\n\nn = 750\nout = []\nfor _ in range(n):\n    out.append(rng())\npts = out\n"
    ]


def test_propagate_constants_indexes_a_tuple_where_it_is_subscripted():
    from shrinkgpu.passes import PropagateConstants

    cand = start("GRID = (16, 8, 4)\nn = GRID[0] * GRID[-1]\nshape = GRID\n")
    assert after(PropagateConstants(), cand) == "n = 16 * 4\nshape = (16, 8, 4)\n"


def test_propagate_constants_reads_sizes_off_a_tensor_factory():
    from shrinkgpu.passes import PropagateConstants

    cand = start("import torch\np = 2.0 * torch.randn(4, 32)\nq = torch.randn(p.shape[1]) + p.size(-2)\n")
    assert each(PropagateConstants(), cand) == [
        # the draw stays (the random stream may matter) ...
        "import torch\np = 2.0 * torch.randn(4, 32)\nq = torch.randn(32) + 4\n",
        # ... or goes, now that nothing reads it
        "import torch\nq = torch.randn(32) + 4\n",
    ]
    # a tensor that is also read whole keeps its binding; only the size is replaced
    cand = start("import torch\nr = torch.randint(0, 3, (5,))\nf(r.shape[0], r)\n")
    assert each(PropagateConstants(), cand) == ["import torch\nr = torch.randint(0, 3, (5,))\nf(5, r)\n"]
    # sizes that are not literals, or an index out of range: nothing
    for src in ("import torch\np = torch.randn(n, 3)\nf(p.shape[0])\n", "import torch\np = torch.randn(2, 3)\nf(p.shape[2])\n"):
        assert PropagateConstants().units(start(src), 0) == []


def test_simplify_expressions_splits_a_nested_tuple_assignment():
    cand = start("step, (x, y) = (0, (a[:2], b[:2]))\nf(x, y)\n")
    assert each(SimplifyExpressions(), cand, 0)[0] == "x = a[:2]\ny = b[:2]\nf(x, y)\n"


# -- cut-library --------------------------------------------------------------------------------
def test_cut_library_replaces_the_library_call_and_deletes_what_only_it_read():
    from shrinkgpu.passes.library import CallPastTheLibrary
    from shrinkgpu.syntax import CutRecord, Facts, Program

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


# -- strip-decorators -----------------------------------------------------------------------------
def test_strip_decorators_offers_each_decorator_and_turns_property_reads_into_calls():
    from shrinkgpu.passes.decorators import StripDecorators
    from shrinkgpu.syntax import Program

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
    from shrinkgpu.passes.decorators import StripDecorators
    from shrinkgpu.syntax import Program

    source = "class A:\n    @property\n    def v(self):\n        return 1\nA().v = 2\n"
    assert StripDecorators().units(Program({"s.py": source}, "s.py").initial(), 0) == []


def test_a_dataclass_config_becomes_a_plain_class_with_its_defaults():
    from shrinkgpu.passes.decorators import StripDecorators
    from shrinkgpu.syntax import Program

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


def test_a_comprehension_over_literals_folds_to_its_value():
    from shrinkgpu.passes.expressions import fold_comprehension
    import libcst as cst

    def folded(text):
        return fold_comprehension(cst.parse_expression(text))

    assert folded('{k: v for k, v in {"name": "tcn", "hidden": [32], "k": 5}.items() if k != "name"}') == "{'hidden': [32], 'k': 5}"
    assert folded("[x * 2 for x in [1, 2, 3]]") == "[2, 4, 6]"
    assert folded("[f(x) for x in [1, 2]]") is None  # a call
    assert folded("[x for x in data]") is None  # a name the comprehension does not bind
    assert folded("[x for x in ().__class__.__subclasses__()]") is None
    cand = start('make(**{k: v for k, v in {"name": "tcn", "k": 5}.items() if k != "name"})\n')
    assert "make(**{'k': 5})\n" in each(SimplifyExpressions(), cand, 0)


def test_inline_a_call_inside_an_expression_that_runs_once_and_unconditionally():
    src = dedent("""\
        import torch
        def head(h):
            z = h.mean(0)
            return z * 2
        x = torch.randn(4, 3)
        y = torch.zeros(3)
        loss = torch.nn.functional.mse_loss(head(x), y) + 1
        """)
    assert each(InlineCalls(), start(src), 0) == [dedent("""\
        import torch
        x = torch.randn(4, 3)
        y = torch.zeros(3)
        h = x
        z = h.mean(0)
        loss = torch.nn.functional.mse_loss(z * 2, y) + 1
        """)]
    # The body rebinds a name the rest of the line reads: not inlined.
    clash = src.replace("loss = torch.nn.functional.mse_loss(head(x), y) + 1", "loss = z_of(head(x), y)\n").replace(
        "z = h.mean(0)", "y = h.mean(0)").replace("return z * 2", "return y * 2")
    assert each(InlineCalls(), start(clash), 0) == []
    # Under a condition or in a lambda: not inlined.
    cond = src.replace("mse_loss(head(x), y) + 1", "mse_loss(head(x) if x.numel() else x, y)")
    assert each(InlineCalls(), start(cond), 0) == []


def test_inline_class_and_static_methods_called_on_the_class():
    src = dedent("""\
        class Config:
            size = 4
            @classmethod
            def from_cli(cls, argv):
                n = len(argv)
                return cls()
            @staticmethod
            def width(n):
                w = n * 2
                return w
        cfg = Config.from_cli([])
        w = Config.width(3)
        """)
    texts = each(InlineCalls(), start(src), 0)
    assert any("cls = Config\nargv = []\nn = len(argv)\ncfg = cls()\n" in t for t in texts), texts
    assert any("n = 3\nw = n * 2\nw = w\n" in t for t in texts), texts
