"""replay-from-state (passes/replay.py): the exact program that starts at the failing
iteration from the saved state."""

from __future__ import annotations

from shrinkgpu.passes.replay import ReplayFromState, state_variable
from shrinkgpu.syntax import Facts, StateRecord

from .helpers import after, dedent, start

TRAIN = """\
import torch

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(1000):
    x, y = batches[step]
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
"""


def record(**kw) -> StateRecord:
    values = dict(
        file="a.py", header="for step in range(1000):", iteration=700, function="<module>",
        entries=(("model", "load"), ("opt", "load"), ("step", "value"), ("x", "value"), ("y", "value")),
        rng=("random", "torch"), state_file="a.min.state.pt",
    )
    values.update(kw)
    return StateRecord(**values)


def test_the_loop_becomes_the_restore_and_one_pass_through_its_body():
    cand = start(TRAIN, Facts(state=record()))
    assert after(ReplayFromState(), cand, level=1) == dedent(
        """\
        import torch

        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        import pathlib
        import random
        state = torch.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)
        model.load_state_dict(state['model'])
        opt.load_state_dict(state['opt'])
        step = state['step']
        x = state['x']
        y = state['y']
        random.setstate(state['rng:random'])
        torch.set_rng_state(state['rng:torch'])
        x, y = batches[step]
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        """
    )


def test_level_zero_also_drops_the_loop_that_took_the_time_before_it():
    src = """\
    import torch

    model = Net()
    for epoch in range(50):
        train_one(model)
    for t in range(64):
        tok = sample(model, t)
    """
    facts = Facts(
        state=record(header="for t in range(64):", iteration=40, entries=(("model", "load"), ("t", "value")), rng=()),
        hot_loops=(("a.py", "for epoch in range(50):", 0.97),),
    )
    cand = start(src, facts)
    restored = (
        "import pathlib\n"
        "state = torch.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)\n"
        "model.load_state_dict(state['model'])\n"
        "t = state['t']\n"
        "tok = sample(model, t)\n"
    )
    assert after(ReplayFromState(), cand, level=0) == "import torch\n\nmodel = Net()\n" + restored
    assert after(ReplayFromState(), cand, level=1) == (
        "import torch\n\nmodel = Net()\nfor epoch in range(50):\n    train_one(model)\n" + restored
    )


def test_a_body_with_continue_keeps_a_loop_over_the_one_restored_item():
    src = """\
    import torch

    for i, (x, y) in enumerate(loader):
        if x is None:
            continue
        step(x, y)
    """
    facts = Facts(state=record(header="for i, (x, y) in enumerate(loader):", entries=(("x", "value"),), rng=()))
    text = after(ReplayFromState(), start(src, facts), level=1)
    assert text.endswith(
        "x = state['x']\n"
        "for i, (x, y) in [(i, (x, y))]:\n"
        "    if x is None:\n"
        "        continue\n"
        "    step(x, y)\n"
    )


def test_inside_a_function_a_module_the_file_imports_is_not_imported_again():
    # ``import torch`` inside train() would make torch local to all of it, and the
    # line above the loop that uses it an UnboundLocalError.
    src = """\
    import torch


    def train(model):
        opt = torch.optim.Adam(model.parameters())
        for step in range(10):
            opt.step()
    """
    facts = Facts(state=record(header="for step in range(10):", function="train", iteration=7,
                               entries=(("opt", "load"),), rng=("torch",)))
    text = after(ReplayFromState(), start(src, facts), level=1)
    assert "    import torch\n" not in text
    assert text.endswith(
        "    opt = torch.optim.Adam(model.parameters())\n"
        "    import pathlib\n"
        "    state = torch.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)\n"
        "    opt.load_state_dict(state['opt'])\n"
        "    torch.set_rng_state(state['rng:torch'])\n"
        "    step = 7\n"  # (a target the state did not hold, taken again from the range)
        "    opt.step()\n"
    )


def test_a_loop_of_another_function_or_header_is_not_replayed():
    src = TRAIN.replace("range(1000)", "range(999)")
    assert ReplayFromState().units(start(src, Facts(state=record())), 1) == []
    assert ReplayFromState().units(start(TRAIN, Facts(state=record(function="main"))), 1) == []
    assert ReplayFromState().units(start(TRAIN), 1) == []  # no state saved


def test_the_state_variable_never_takes_a_name_the_file_uses():
    assert state_variable("x = 1\n") == "state"
    assert state_variable("opt.state[p]\n") == "saved_state"
    assert state_variable("state = saved_state = replay_state = 0\n") == "replay_state_1"


def test_generators_are_restored_through_the_names_the_file_imports_them_as():
    # ``import numpy as np`` binds np, not numpy: the restore uses np.
    src = """\
    import numpy as np
    import torch as T

    for step in range(10):
        T.manual_seed(step)
    """
    facts = Facts(state=record(header="for step in range(10):", entries=(("step", "value"),),
                               rng=("numpy", "random", "torch")))
    text = after(ReplayFromState(), start(src, facts), level=1)
    assert text == dedent(
        """\
        import numpy as np
        import torch as T

        import pathlib
        import random
        state = T.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)
        step = state['step']
        np.random.set_state(state['rng:numpy'])
        random.setstate(state['rng:random'])
        T.set_rng_state(state['rng:torch'])
        T.manual_seed(step)
        """
    )


def test_the_files_the_training_wrote_are_put_back_where_the_training_was():
    # bpr-like: the training writes the checkpoint the statement before the evaluation loads
    src = """\
    import torch

    model = Net()
    for epoch in range(50):
        train_one(model)
        torch.save(model.state_dict(), "runs/best.pt")
    model.load_state_dict(torch.load("runs/best.pt"))
    for t in range(64):
        tok = sample(model, t)
    """
    facts = Facts(
        state=record(header="for t in range(64):", iteration=0, entries=(("model", "load"), ("t", "value")), rng=(),
                     files_dir="a.min.state.files"),
        hot_loops=(("a.py", "for epoch in range(50):", 0.97),),
    )
    cand = start(src, facts)
    assert after(ReplayFromState(), cand, level=0) == dedent(
        """\
        import torch

        model = Net()
        import pathlib
        import shutil
        shutil.copytree(pathlib.Path(__file__).with_name('a.min.state.files'), '.', dirs_exist_ok=True)
        model.load_state_dict(torch.load("runs/best.pt"))
        import pathlib
        state = torch.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)
        model.load_state_dict(state['model'])
        t = state['t']
        tok = sample(model, t)
        """
    )
    # with the loops kept, the restore puts the files back itself
    level1 = after(ReplayFromState(), cand, level=1)
    assert "for epoch in range(50):" in level1
    assert (level1.index("shutil.copytree(") > level1.index("for epoch")
            and level1.index("shutil.copytree(") < level1.index("state = torch.load"))


def test_the_loops_the_failure_runs_through_stay_and_the_files_go_back_where_the_training_ran():
    # scan_rope_beam-like: the model's block loop and the evaluation's loop over batches
    # are hot and on the failing stack (main -> evaluate -> decode -> model); the greedy
    # decoder of the validations is hot and comes first in the file, but is not on it
    src = """\
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x


    def greedy(model, seq):
        for _ in range(32):
            seq = step(model, seq)
        return seq


    def decode(model, seq):
        for t in range(64):
            seq = step(model, seq)
        return seq


    def evaluate(model, rows):
        for row in rows:
            decode(model, row)


    def main():
        model = Net()
        for epoch in range(50):
            greedy(model, val)
            torch.save(model.state_dict(), "runs/best.pt")
        model.load_state_dict(torch.load("runs/best.pt"))
        evaluate(model, test_rows)


    main()
    """
    facts = Facts(
        state=record(header="for t in range(64):", iteration=9, function="decode",
                     entries=(("model", "load"), ("seq", "value"), ("t", "value")), rng=(),
                     files_dir="a.min.state.files"),
        hot_loops=(("a.py", "for epoch in range(50):", 0.6), ("a.py", "for b in self.blocks:", 0.5),
                   ("a.py", "for _ in range(32):", 0.3), ("a.py", "for row in rows:", 0.3)),
        # main() -> evaluate -> decode -> forward, by line
        stack=(("a.py", 37), ("a.py", 34), ("a.py", 25), ("a.py", 19), ("a.py", 7)),
    )
    cand = start(src, facts)
    level0 = after(ReplayFromState(), cand, level=0)
    # the failure's own way stays
    assert "for b in self.blocks:\n            x = b(x)" in level0
    assert "for row in rows:\n        decode(model, row)" in level0
    # the training and the validation's decoder go
    assert "for epoch in range(50):" not in level0 and "for _ in range(32):" not in level0
    # the checkpoint is back where the training ran, before the statement that loads it
    copy = level0.index("shutil.copytree(")
    assert level0.index("def main():") < copy < level0.index('torch.load("runs/best.pt")')


def test_files_text_uses_the_names_the_file_imports():
    from shrinkgpu.passes.replay import files_text

    text = "import shutil as sh\nfrom pathlib import Path\n"
    assert files_text(record(files_dir="a.min.state.files"), text) == (
        "import pathlib\nsh.copytree(pathlib.Path(__file__).with_name('a.min.state.files'), '.', dirs_exist_ok=True)\n"
    )
    assert files_text(record(), text) == ""


REGISTRY = """\
import torch

cases = {"gelu": (gelu, lambda i: (x, b)), "ema": (ema, lambda i: (p, q, 0.5))}
for name, (fn, make_args) in cases.items():
    run_case(name, fn, make_args)
"""


def test_targets_the_state_could_not_carry_are_taken_again_from_a_registry_that_walks_the_same_way():
    # a function and a lambda are no data a file carries: the state has ``name`` only
    facts = Facts(state=record(header="for name, (fn, make_args) in cases.items():", iteration=1,
                               entries=(("name", "value"),), rng=()))
    assert after(ReplayFromState(), start(REGISTRY, facts), level=1) == dedent(
        """\
        import torch

        cases = {"gelu": (gelu, lambda i: (x, b)), "ema": (ema, lambda i: (p, q, 0.5))}
        import pathlib
        state = torch.load(pathlib.Path(__file__).with_name('a.min.state.pt'), weights_only=False)
        name = state['name']
        import itertools
        name, (fn, make_args) = next(itertools.islice(cases.items(), 1, None))
        run_case(name, fn, make_args)
        """
    )


def test_a_loader_s_items_are_never_taken_again_and_a_literal_s_are():
    import libcst as cst

    from shrinkgpu.passes.replay import rebind_text

    state = record(header="", iteration=2, entries=(), rng=())
    loop = lambda src: cst.parse_statement(src)  # noqa: E731
    # what a loader yields comes once, or in a new order: the replay's check would pay an
    # epoch of loading to find that out
    assert rebind_text(loop("for batch in loader:\n    step(batch)\n"), state) == ""
    assert rebind_text(loop("for i, batch in enumerate(train_loader):\n    step(batch)\n"), state) == ""
    assert rebind_text(loop("for case in [A(), B(), C()]:\n    case.run()\n"), state) == (
        "import itertools\ncase = next(itertools.islice([A(), B(), C()], 2, None))\n"
    )
    assert rebind_text(loop("for k, m in enumerate(MODELS.values()):\n    m(k)\n"), state) == (
        "import itertools\nk, m = (2, next(itertools.islice(MODELS.values(), 2, None)))\n"
    )
    # every target saved: nothing to bind again
    saved = record(header="", iteration=2, entries=(("case", "value"),), rng=())
    assert rebind_text(loop("for case in [1, 2, 3]:\n    run(case)\n"), saved) == ""


def test_a_registry_walked_with_the_file_s_own_itertools_is_not_imported_again():
    src = """\
    import itertools as it


    def main(cases):
        for name, fn in cases.items():
            fn(name)
    """
    facts = Facts(state=record(header="for name, fn in cases.items():", function="main", iteration=3,
                               entries=(("name", "value"),), rng=()))
    text = after(ReplayFromState(), start(src, facts), level=1)
    assert "import itertools\n" not in text
    assert text.endswith("    name, fn = next(it.islice(cases.items(), 3, None))\n    fn(name)\n")
