"""load-saved-objects (passes/data.py): a data object the first run saved is loaded instead
of built.
"""

from __future__ import annotations

from shrinkgpu.passes import LoadSavedObjects
from shrinkgpu.syntax import Facts, Program, SavedObject, StateRecord

from .helpers import after, each, start

SRC = """\
import numpy as np
import torch
SHAPES = ("box", "ball")
def sample(rng, n):
    return rng.normal(size=(n, 3))
class Clouds(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.clouds = [sample(rng, int(rng.integers(5, 9))) for _ in range(n)]
    def __getitem__(self, i):
        return torch.from_numpy(self.clouds[i])
seed = 3
ds = Clouds(40, seed)
torch.cat([ds[0], ds[1]]).view(-1, 4)
"""
SAVED = SavedObject(name="ds", cls="Clouds", file="a.ds.pkl", size=1 << 20)


def test_the_building_statement_loads_the_saved_object_and_the_constructor_goes_with_what_only_it_read():
    text = after(LoadSavedObjects(), start(SRC, Facts(saved_objects=(SAVED,))))
    # the class stays (unpickling finds it by name) with what the failing path calls on
    # it; ``__init__``, the helper and the import only it used, and the seed only the
    # statement read go
    assert text == (
        "import torch\n"
        'SHAPES = ("box", "ball")\n'
        "class Clouds(torch.utils.data.Dataset):\n"
        "    def __getitem__(self, i):\n"
        "        return torch.from_numpy(self.clouds[i])\n"
        "import pathlib\n"
        "import pickle\n"
        "ds = pickle.loads(pathlib.Path(__file__).with_name('a.ds.pkl').read_bytes())\n"
        "torch.cat([ds[0], ds[1]]).view(-1, 4)\n"
    )


def test_nothing_is_offered_without_a_saved_object_or_for_another_name_or_form():
    assert LoadSavedObjects().units(start(SRC), 0) == []
    other = SavedObject(name="train", cls="Clouds", file="a.train.pkl", size=1 << 20)
    assert LoadSavedObjects().units(start(SRC, Facts(saved_objects=(other,))), 0) == []
    # a tuple target or a value that is no call is not how a constructor's result is bound
    src = "ds, n = Clouds(4, 1), 2\nds = make\n"
    assert LoadSavedObjects().units(start(src, Facts(saved_objects=(SAVED,))), 0) == []
    # a small object is shown as code, not loaded: the passes above can write it down
    small = SavedObject(name="ds", cls="Clouds", file="a.ds.pkl", size=1400)
    assert LoadSavedObjects().units(start(SRC, Facts(saved_objects=(small,))), 0) == []
    # no level beyond 0
    assert LoadSavedObjects().units(start(SRC, Facts(saved_objects=(SAVED,))), 1) is None


def test_a_statement_outside_the_main_scripts_directory_cannot_name_the_file_beside_it():
    files = {"a.py": "from pkg.data import ds\nds.x\n", "pkg/data.py": "class Clouds:\n    pass\nds = Clouds()\n"}
    program = Program(files, "a.py", Facts(saved_objects=(SAVED,)))
    assert LoadSavedObjects().units(program.initial(), 0) == []
    # with the file recorded for that directory it is offered there
    here = SavedObject(name="ds", cls="Clouds", file="a.ds.pkl", size=1 << 20, directory="pkg")
    texts = each(LoadSavedObjects(), Program(files, "a.py", Facts(saved_objects=(here,))).initial(), file="pkg/data.py")
    assert texts == [(
        "class Clouds:\n    pass\nimport pathlib\nimport pickle\n"
        "ds = pickle.loads(pathlib.Path(__file__).with_name('a.ds.pkl').read_bytes())\n"
    )]


def test_a_nested_class_is_found_by_its_qualified_name():
    src = (
        "class Data:\n"
        "    class Bank:\n"
        "        def __init__(self):\n"
        "            self.rows = list(range(99))\n"
        "bank = Data.Bank()\n"
        "bank.rows[100]\n"
    )
    saved = SavedObject(name="bank", cls="Data.Bank", file="a.bank.pkl", size=1 << 20)
    text = after(LoadSavedObjects(), start(src, Facts(saved_objects=(saved,))))
    assert "__init__" not in text and "class Bank:" in text and "bank = pickle.loads(" in text


# -- a data helper's results, for a program started at its failing step ---------------------

HELPERS = """\
import random
import torch
def phrase(rng):
    return [rng.choice("ab") for _ in range(3)]
def build_splits(n, seed):
    rng = random.Random(seed)
    pairs = [phrase(rng) for _ in range(n)]
    return pairs[:n // 2], pairs[n // 2:]
train, test = build_splits(20000, 1)
vocab = sorted({t for p in train for t in p})
for step in range(3):
    torch.tensor(test[step]).view(2)
"""
SPLITS = SavedObject(name="train", cls="build_splits()", file="a.train-test.pkl", size=1 << 20,
                     targets=("train", "test"))
STATE = StateRecord("a.py", "for step in range(3):", 1, "<module>", (("step", "value"),), (), "a.min.state.pt")


def test_a_helpers_results_are_loaded_at_the_failing_step_and_the_helper_goes_with_what_only_it_read():
    text = after(LoadSavedObjects(), start(HELPERS, Facts(saved_objects=(SPLITS,), state=STATE)))
    assert text == (
        "import torch\n"
        "import pathlib\n"
        "import pickle\n"
        "train, test = pickle.loads(pathlib.Path(__file__).with_name('a.train-test.pkl').read_bytes())\n"
        "vocab = sorted({t for p in train for t in p})\n"
        "for step in range(3):\n"
        "    torch.tensor(test[step]).view(2)\n"
    )


def test_a_helpers_results_are_not_offered_to_a_program_that_runs_from_its_start_nor_to_another_form():
    # without the state, the helper shows where the values came from
    assert LoadSavedObjects().units(start(HELPERS, Facts(saved_objects=(SPLITS,))), 0) == []
    state = Facts(saved_objects=(SPLITS,), state=STATE)
    # the names must be the ones the statement binds, in its order
    swapped = "train, test = 1, 2\ntest, train = build_splits(4, 1)\n"
    assert LoadSavedObjects().units(start(swapped, state), 0) == []
    # a method's call is not a helper's (the probe saves only calls of a bare name)
    method = "train, test = data.build_splits(4, 1)\n"
    assert LoadSavedObjects().units(start(method, state), 0) == []
    one = SavedObject(name="xs", cls="make()", file="a.xs.pkl", size=1 << 20, targets=("xs",))
    assert each(LoadSavedObjects(), start("def make():\n    return [0] * 99\nxs = make()\nxs[0]\n",
                                          Facts(saved_objects=(one,), state=STATE))) == [
        "import pathlib\nimport pickle\nxs = pickle.loads(pathlib.Path(__file__).with_name('a.xs.pkl').read_bytes())\n"
        "xs[0]\n"
    ]
