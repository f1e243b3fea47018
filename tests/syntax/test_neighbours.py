"""syntax/neighbours.py: the minimal case with one entry of its failing index set to each
boundary value, and with its loader's short and last batch; text in, texts out."""

from __future__ import annotations

from shrinkgpu.syntax.neighbours import index_neighbours, loader_neighbours

CLASS_INDEX = """\
import torch
import torch.nn.functional as F
logits = torch.randn(3, 4)
target = torch.tensor([0, 2, 4])
loss = F.cross_entropy(logits, target)
print(loss)
"""
ENDS = "raise SystemExit(0)  # shrinkgpu verify: the neighbour ends after the call\n"


def test_a_class_target_gets_each_boundary_value_after_its_last_assignment_and_the_case_ends_at_the_call():
    neighbours = index_neighbours(CLASS_INDEX, "cross_entropy", 4)
    assert [(n.name, n.valid) for n in neighbours] == [
        ("target with one entry -1", False), ("target with one entry 0", True), ("target with one entry 3", True),
        ("target with one entry 4", False), ("target with one entry -100", True),  # ignore_index's default
    ]
    assert neighbours[3].text == (
        "import torch\nimport torch.nn.functional as F\nlogits = torch.randn(3, 4)\ntarget = torch.tensor([0, 2, 4])\n"
        "target = target.flatten().index_fill(0, torch.zeros(1, dtype=torch.long), 4).view_as(target)\n"
        "loss = F.cross_entropy(logits, target)\n" + ENDS
    )
    assert [n.name for n in index_neighbours(CLASS_INDEX, "cross_entropy", 4, ignore_index=255)][-1] == \
        "target with one entry 255"


def test_an_index_written_in_the_call_is_set_in_place():
    source = "import torch\nx = torch.gather(torch.zeros(2, 3), 1, torch.tensor([[5], [0]]))\n"
    neighbours = index_neighbours(source, "gather", 3)
    assert [(n.name, n.valid) for n in neighbours] == [
        ("index with one entry -1", False), ("index with one entry 0", True), ("index with one entry 2", True),
        ("index with one entry 3", False),
    ]
    assert neighbours[3].text == (
        "import torch\nx = torch.gather(torch.zeros(2, 3), 1, torch.tensor([[5], [0]]).flatten().index_fill(0, "
        "torch.zeros(1, dtype=torch.long), 3).view_as(torch.tensor([[5], [0]])))\n" + ENDS
    )


def test_an_index_a_loop_binds_is_set_first_thing_in_the_loop():
    source = ("import torch\nemb = torch.nn.Embedding(10, 2)\nfor tokens in batches:\n    out = emb(tokens)\n"
              "    log(out)\n")
    first = index_neighbours(source, "embedding", 10)[0]
    assert (first.name, first.valid) == ("indices with one entry -1", False)
    assert first.text == (
        "import torch\nemb = torch.nn.Embedding(10, 2)\nfor tokens in batches:\n"
        "    tokens = tokens.flatten().index_fill(0, torch.zeros(1, dtype=torch.long), -1).view_as(tokens)\n"
        "    out = emb(tokens)\n    " + ENDS
    )


def test_no_neighbour_without_a_call_of_an_index_operator():
    assert index_neighbours(CLASS_INDEX, "gather", 4) == []
    assert index_neighbours(CLASS_INDEX, "softmax", 4) == []  # not an index operator
    assert index_neighbours(CLASS_INDEX, "cross_entropy", 0) == []
    assert index_neighbours("x = (", "cross_entropy", 4) == []


def test_a_loader_gets_a_batch_of_one_and_its_last_batch():
    source = ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, 32, shuffle=True)\n"
              "x = next(iter(loader))\n")
    short, last = loader_neighbours(source)
    assert (short.name, short.valid, last.name, last.valid) == (
        "a short batch (batch_size=1)", True, "the last batch", True)
    assert short.text == ("from torch.utils.data import DataLoader\n"
                          "loader = DataLoader(ds, shuffle=True, batch_size=1)\n"
                          "x = next(iter(loader))\n")
    assert last.text == ("from torch.utils.data import DataLoader\nloader = DataLoader(ds, 32, shuffle=True)\n"
                         "x = list(loader)[-1]\n")
    assert loader_neighbours("x = 1\n") == []
