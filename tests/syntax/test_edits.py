"""syntax/edits.py: an edit is a value whose operation reads as its word, and the imports a
line holds, relative ones resolved against the file's package."""

from __future__ import annotations

import libcst as cst
import pytest

from shrinkgpu.syntax.edits import STRUCTURAL, Edit, EditOp, import_targets


def line(text: str) -> cst.CSTNode:
    return cst.parse_statement(text)


def test_an_edit_written_with_the_word_is_the_same_edit():
    assert Edit("delete", 3) == Edit(EditOp.DELETE, 3)
    assert hash(Edit("delete", 3)) == hash(Edit(EditOp.DELETE, 3))
    assert Edit("delete", 3).op == "delete" and f"{EditOp.BODY}" == "body"
    with pytest.raises(ValueError):
        Edit("rewrite", 3)


def test_an_edit_prints_what_it_does_to_which_target():
    assert repr(Edit("delete", 4)) == "delete(#4)"
    assert repr(Edit("replace", 2, text="x = 1")) == "replace(#2, 'x = 1')"
    assert repr(Edit("expr", node=7, text="16")) == "expr(@7 -> '16')"
    assert repr(Edit("remove", node=5)) == "remove(@5)"
    assert repr(Edit("drop", file="heads.py")) == "drop(heads.py)"


def test_only_edits_that_change_a_statements_shape_are_structural():
    assert STRUCTURAL == {EditOp.DELETE, EditOp.BODY, EditOp.ELSE, EditOp.INLINE}
    assert sorted([Edit("expr", node=1), Edit("delete", 2)])[0].op == "delete"  # ordered by the word


def test_the_imports_of_a_line():
    assert import_targets(line("import torch.nn\n")) == ("torch.nn", [])
    assert import_targets(line("from torch import nn, optim as o\n")) == ("torch", [("nn", None), ("optim", "o")])
    assert import_targets(line("from heads import *\n")) == ("heads", [("*", None)])
    assert import_targets(line("import os, sys\n")) is None  # not one plain import
    assert import_targets(line("x = 1\n")) is None
    assert import_targets(line("from . import models\n"), "pkg/train.py") is None


def test_a_relative_import_is_resolved_against_the_files_package():
    assert import_targets(line("from .models import Net\n"), "pkg/train.py") == ("pkg.models", [("Net", None)])
    assert import_targets(line("from ..layers import Block\n"), "pkg/sub/m.py") == ("pkg.layers", [("Block", None)])
    assert import_targets(line("from .models import Net\n"), "train.py") is None  # no package to start from
    assert import_targets(line("from .models import Net\n")) is None  # no file given
