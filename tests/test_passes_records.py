"""Exact before/after programs for the record passes (drop-enumerate,
append-loop-to-list, split-records), single-use binding inlining, and the size and slice
alternatives of simplify-expressions; and the chain of them run on the shape of code
that record datasets leave behind, with an exec oracle."""

from __future__ import annotations


import pytest

from shrinkgpu.passes import AppendLoopToList, DropEnumerate, InlineBindings, SimplifyExpressions, SplitRecords

from test_passes import after, dedent, each, start


# -- drop-enumerate ------------------------------------------------------------------------
def test_drop_enumerate_on_a_loop_whose_index_is_unread():
    cand = start("for k, c in enumerate(names):  # rows\n    f(c)\n")
    assert after(DropEnumerate(), cand) == "for c in names:  # rows\n    f(c)\n"
    cand = start("for i, (a, b) in enumerate(pairs):\n    h(a, b)\n")
    assert after(DropEnumerate(), cand) == "for a, b in pairs:\n    h(a, b)\n"
    # the index is read: nothing
    assert DropEnumerate().units(start("for k, c in enumerate(names):\n    f(c, k)\n"), 0) == []


def test_drop_enumerate_in_a_comprehension():
    cand = start("xs = [g(c) for k, c in enumerate(names) if c]\nys = [g(c) for k, c in enumerate(names) if k]\n")
    assert each(DropEnumerate(), cand) == ["xs = [g(c) for c in names if c]\nys = [g(c) for k, c in enumerate(names) if k]\n"]


# -- append-loop-to-list -------------------------------------------------------------------
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


# -- split-records ---------------------------------------------------------------------------
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


# -- inline-bindings -------------------------------------------------------------------------
BINDINGS_SRC = """\
import torch
import torch.nn as nn
net = nn.Sequential(
    nn.Linear(32, 1),
    nn.Linear(1, 4),
)
criterion = nn.CrossEntropyLoss()
emb, target = a, b
logits = net(emb)
criterion(logits, target)
"""


def test_inline_bindings_puts_a_single_use_value_where_it_is_read():
    # one of each pair per round: ``logits`` waits while ``net`` is pasted into its line
    assert after(InlineBindings(), start(BINDINGS_SRC)) == dedent(
        """\
        import torch
        import torch.nn as nn
        emb, target = a, b
        logits = nn.Sequential(
            nn.Linear(32, 1),
            nn.Linear(1, 4),
        )(emb)
        nn.CrossEntropyLoss()(logits, target)
        """
    )
    # an operation gets parentheses where it lands
    assert after(InlineBindings(), start("n = a + b\nf(n * 2)\n")) == "f((a + b) * 2)\n"


@pytest.mark.parametrize(
    "src",
    [
        "n = f(k)\ng(n)\ng(n)\n",  # read twice
        "w = torch.randn(4)\nfor q in qs:\n    h(w)\n",  # read in a loop: would run each time
        "w = f(x)\nys = [h(w, y) for y in ys]\n",  # ... or in a comprehension's body
        "w = f(x)\nx = 3\ng(w)\n",  # what the value reads is rebound in between
        "w = f(x)\nx.add_(1)\ng(w)\n",  # ... or changed in place
        "def f():\n    w = g()\n    return lambda: w\n",  # in a lambda
    ],
)
def test_inline_bindings_left_alone_where_the_value_would_run_differently(src):
    assert InlineBindings().units(start(src), 0) == []


def test_inline_bindings_into_a_comprehensions_first_iterable_runs_it_once():
    cand = start("xs = load()\nys = [f(x) for x in xs]\n")
    assert after(InlineBindings(), cand) == "ys = [f(x) for x in load()]\n"


# -- simplify-expressions: sizes from the program, slices --------------------------------------
def test_simplify_expressions_offers_smaller_sizes_the_program_already_uses():
    cand = start("xs = torch.randn(48)\nys = xs[:32]\n")
    flat = [o for level in range(6) for o in each(SimplifyExpressions(), cand, level)]
    assert "xs = torch.randn(32)\nys = xs[:32]\n" in flat  # 32 appears in the program
    assert "xs = torch.randn(48)\nys = xs\n" in flat  # the slice dropped


def test_simplify_expressions_splits_a_parenthesised_tuple_assignment():
    cand = start("x, y = (f(a), g(b))\nh(x, y)\n")
    assert "x = f(a)\ny = g(b)\nh(x, y)\n" in each(SimplifyExpressions(), cand, 0)


def test_simplify_expressions_picks_an_entry_out_of_a_dict_literal():
    cand = start('ids = {"input_ids": torch.randint(1, 50, (8, 12)), "n": n}["input_ids"]\nf(ids)\n')
    flat = [o for level in range(3) for o in each(SimplifyExpressions(), cand, level)]
    assert 'ids = torch.randint(1, 50, (8, 12))\nf(ids)\n' in flat
    # another entry does work of its own: it would be lost
    cand = start('ids = {"a": f(x), "b": g(y)}["a"]\nh(ids)\n')
    assert not any(o.startswith("ids = f(x)\n") for level in range(3) for o in each(SimplifyExpressions(), cand, level))
