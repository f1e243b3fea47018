"""drop-enumerate, append-loop-to-list and split-records (passes/records.py): the exact
program before and after their units.
"""

from __future__ import annotations

import pytest

from shrinkgpu.passes import AppendLoopToList, DropEnumerate, SplitRecords

from .helpers import after, dedent, each, start

# --------------------------------------------------------------------------------------
# DropEnumerate
# --------------------------------------------------------------------------------------

def test_drop_enumerate_on_a_loop_whose_index_is_unread():
    cand = start("for k, c in enumerate(names):  # rows\n    f(c)\n")
    assert after(DropEnumerate(), cand) == "for c in names:  # rows\n    f(c)\n"
    cand = start("for i, (a, b) in enumerate(pairs):\n    h(a, b)\n")
    assert after(DropEnumerate(), cand) == "for a, b in pairs:\n    h(a, b)\n"
    # the index is read: nothing
    assert DropEnumerate().units(start("for k, c in enumerate(names):\n    f(c, k)\n"), 0) == []


def test_drop_enumerate_in_a_comprehension():
    cand = start("xs = [g(c) for k, c in enumerate(names) if c]\nys = [g(c) for k, c in enumerate(names) if k]\n")
    assert each(DropEnumerate(), cand) == ["xs = [g(c) for c in names if c]\n"
                                           "ys = [g(c) for k, c in enumerate(names) if k]\n"]


# --------------------------------------------------------------------------------------
# AppendLoopToList
# --------------------------------------------------------------------------------------

APPEND_SRC = """\
class V:
    def __init__(self, n):
        self.rows = []
        names = torch.randint(0, 4, (n,))
        for k, c in enumerate(names):
            name = CLASS_NAMES[c]
            self.rows.append({
                "class_id": IDS[name],
                "embedding": torch.randn(3),
            })
"""


def test_append_loop_becomes_a_list_comprehension_with_its_named_values_substituted():
    assert after(AppendLoopToList(), start(APPEND_SRC)) == dedent(
        """\
        class V:
            def __init__(self, n):
                names = torch.randint(0, 4, (n,))
                self.rows = [{
                    "class_id": IDS[CLASS_NAMES[c]],
                    "embedding": torch.randn(3),
                } for k, c in enumerate(names)]
        """
    )


@pytest.mark.parametrize(
    "src",
    [
        # a named value read twice would be computed twice
        "out = []\nfor x in xs:\n    y = f(x)\n    out.append(y + y)\n",
        # the loop variable is read after the loop
        "out = []\nfor x in xs:\n    out.append(f(x))\nprint(x)\n",
        # the list is read between its creation and the loop
        "out = []\ng(out)\nfor x in xs:\n    out.append(f(x))\n",
        # anything but named values and the append
        "out = []\nfor x in xs:\n    if x:\n        out.append(f(x))\n",
        "out = []\nfor x in xs:\n    out.append(f(x))\nelse:\n    g()\n",
        # the loop reads the list it builds
        "out = []\nfor x in xs:\n    out.append(x + len(out))\n",
    ],
)
def test_append_loop_left_alone_when_a_comprehension_would_differ(src):
    assert AppendLoopToList().units(start(src), 0) == []


# --------------------------------------------------------------------------------------
# SplitRecords
# --------------------------------------------------------------------------------------

RECORDS_SRC = """\
names = torch.randint(0, 4, (48,))
rows = [{"id": f"v{c}", "class_id": IDS[CLASS_NAMES[c]], "embedding": torch.randn(32)} for c in names]
emb = torch.stack([rows[i]["embedding"] for i in range(32)])
target = torch.tensor([rows[i]["class_id"] for i in range(32)])
first = rows[0]["class_id"]
"""


def test_split_records_makes_one_list_per_field_read():
    assert after(SplitRecords(), start(RECORDS_SRC)) == dedent(
        """\
        names = torch.randint(0, 4, (48,))
        class_id = [IDS[CLASS_NAMES[c]] for c in names]
        embedding = [torch.randn(32) for c in names]
        emb = torch.stack(embedding[:32])
        target = torch.tensor(class_id[:32])
        first = class_id[0]
        """
    )


def test_split_records_runs_like_the_records_it_replaces():
    import torch

    env = {"torch": torch, "IDS": {"a": 1, "b": 2, "c": 3, "d": 4}, "CLASS_NAMES": "abcd"}
    before, after_ = dict(env), dict(env)
    torch.manual_seed(0)
    exec(RECORDS_SRC.replace("c]]", "int(c)]]"), before)
    torch.manual_seed(0)
    exec(after(SplitRecords(), start(RECORDS_SRC)).replace("c]]", "int(c)]]"), after_)
    for name in ("emb", "target"):
        a, b = before[name], after_[name]
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
    assert torch.equal(before["target"], after_["target"])


@pytest.mark.parametrize(
    "src",
    [
        # a record used whole
        "rows = [{'a': f(c)} for c in names]\ng(rows[0])\n",
        "rows = [{'a': f(c)} for c in names]\ng(rows)\n",
        # a key the records do not have, or one that is not a literal
        "rows = [{'a': f(c)} for c in names]\ng(rows[0]['b'])\n",
        "rows = [{'a': f(c)} for c in names]\ng(rows[0][k])\n",
        # two lists would walk a generator twice
        "rows = [{'a': f(c), 'b': g(c)} for c in gen()]\nh(rows[0]['a'], rows[0]['b'])\n",
    ],
)
def test_split_records_left_alone(src):
    assert SplitRecords().units(start(src), 0) == []


def test_split_records_names_a_list_after_its_field_unless_the_name_is_taken():
    cand = start("rows = [{'class': f(c), 'x': g(c)} for c in names]\nx = 1\nh(rows[0]['class'], rows[0]['x'])\n")
    assert after(SplitRecords(), cand) == (
        "rows_class = [f(c) for c in names]\nrows_x = [g(c) for c in names]\nx = 1\nh(rows_class[0], rows_x[0])\n"
    )


def test_split_records_walks_a_call_once_when_one_field_is_read():
    cand = start("rows = [{'a': f(c), 'b': g(c)} for c in gen()]\nh(rows[0]['a'])\n")
    assert after(SplitRecords(), cand) == "a = [f(c) for c in gen()]\nh(a[0])\n"
