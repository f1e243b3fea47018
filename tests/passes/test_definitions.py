"""delete-definitions and prune-imports (passes/definitions.py): the exact program
before and after their units.
"""

from __future__ import annotations

from shrinkgpu.passes import DeleteDefinitions, PruneImports

from .helpers import DEFS, after, dedent, each, start

# --------------------------------------------------------------------------------------
# DeleteDefinitions
# --------------------------------------------------------------------------------------

def test_delete_definitions_takes_each_def_with_its_users():
    cand = start(DEFS)
    units = DeleteDefinitions().units(cand, 0)
    assert [[e.stmt for e in u] for u in units] == [
        [1, 8, 10],  # helper, ``y = helper() * x``, ``print(y)``
        [3],  # class Net
        [4],  # Net.forward, a def at depth 1
    ]
    assert after(DeleteDefinitions(), cand) == dedent(
        """\
        import torch


        x = torch.ones(2)
        if x.sum() > 0:
            z = 1
        """
    )
    assert DeleteDefinitions().units(cand, 1) is None


# --------------------------------------------------------------------------------------
# PruneImports
# --------------------------------------------------------------------------------------

def test_prune_imports_removes_the_names_nothing_reads():
    cases = {
        "from torch.utils.data import DataLoader, Dataset\nclass A(Dataset): pass\n": (
            "from torch.utils.data import Dataset\nclass A(Dataset): pass\n"
        ),
        "from torch.utils.data import (\n    Dataset,\n    DataLoader,\n)\nclass A(Dataset): pass\n": (
            "from torch.utils.data import (\n    Dataset,\n)\nclass A(Dataset): pass\n"
        ),
        "import os, sys\nsys.exit(0)\n": "import sys\nsys.exit(0)\n",
        "from a import b as c, d, e\nprint(c)\n": "from a import b as c\nprint(c)\n",
    }
    for before, expected in cases.items():
        assert each(PruneImports(), start(before)) == [expected]
    # a single name is statement deletion's business; __future__ is never touched
    assert PruneImports().units(start("import os\n"), 0) == []
    assert PruneImports().units(start("from __future__ import annotations, division\n"), 0) == []
