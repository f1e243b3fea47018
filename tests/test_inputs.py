"""inputs.py: what the user points shrinkgpu at, read the way Python would run it: a
source in its declared encoding, a notebook's code cells, the file ``python -m`` runs."""

from __future__ import annotations

import json

import pytest

from shrinkgpu.inputs import (
    InputError,
    encode_source,
    module_file,
    notebook_to_script,
    read_source,
    script_for_notebook,
    source_encoding,
)

LATIN1 = "# -*- coding: latin-1 -*-\nname = 'Müller'\n"


def test_a_source_is_read_and_written_in_the_encoding_it_declares(tmp_path):
    assert source_encoding(LATIN1) == "latin-1"
    assert source_encoding("#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\nx = 1\n") == "cp1252"
    assert source_encoding("x = 1\n# coding: latin-1\n") == "utf-8"  # after code it is only a comment
    path = tmp_path / "s.py"
    path.write_bytes(encode_source(LATIN1))
    assert path.read_bytes() == LATIN1.encode("latin-1") and read_source(path) == LATIN1
    # a text its declared codec cannot hold is written as UTF-8
    assert encode_source("# coding: ascii\nname = 'Müller'\n") == "# coding: ascii\nname = 'Müller'\n".encode("utf-8")


def test_a_source_python_cannot_decode_is_an_input_error_that_says_why(tmp_path):
    path = tmp_path / "s.py"
    for data, said in ((b"# coding: ascii\nname = '\xff'\n", r"not valid in its declared encoding \(ordinal not in "
                                                                 r"range\(128\) at byte 24\)"),
                       (b"# coding: klingon\nx = 1\n", "cannot be decoded as Python source: unknown encoding"),
                       (b"name = '\xff\xfe'\n", "cannot be decoded as Python source: invalid or missing encoding")):
        path.write_bytes(data)
        with pytest.raises(InputError, match=said):
            read_source(path)


def notebook(tmp_path, cells):
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    return path


def code(*lines):
    return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1, "source": list(lines)}


def test_a_notebooks_code_cells_are_one_script_without_what_is_not_python(tmp_path):
    path = notebook(tmp_path, [
        {"cell_type": "markdown", "metadata": {}, "source": ["# A notebook"]},
        code("%matplotlib inline\n", "import torch\n", "!nvidia-smi\n", "x = torch.zeros(2, 3)\n", "x"),
        code("%%time\n", "y = x.t()\n", "y.view(6)"),
        code("%%bash\n", "ls"),
    ])
    got = notebook_to_script(path)
    assert got.text == "# In[2]:\nimport torch\nx = torch.zeros(2, 3)\nx\n\n# In[3]:\ny = x.t()\ny.view(6)\n"
    assert got.notes == ("2 IPython magic line(s) of the notebook were dropped (not Python)",
                         "1 shell escape(s) ('!...') of the notebook were dropped",
                         "1 cell(s) run by a cell magic other than %%time were dropped")
    assert script_for_notebook(path) == tmp_path / "demo.py"
    (tmp_path / "demo.py").write_text("")
    assert script_for_notebook(path) == tmp_path / "demo_notebook.py"  # never a file that is there


def test_a_notebook_that_is_none_or_not_python_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no cells"):
        notebook_to_script(notebook(tmp_path, None))
    with pytest.raises(InputError, match="not valid Python once magics are dropped"):
        notebook_to_script(notebook(tmp_path, [code("def f(:\n")]))


def test_python_dash_m_runs_the_modules_file_or_its_main(tmp_path):
    (tmp_path / "pkg" / "tool").mkdir(parents=True)
    (tmp_path / "pkg" / "train.py").write_text("")
    (tmp_path / "pkg" / "tool" / "__main__.py").write_text("")
    assert module_file("pkg.train", tmp_path) == tmp_path / "pkg" / "train.py"
    assert module_file("pkg.tool", tmp_path) == tmp_path / "pkg" / "tool" / "__main__.py"
    with pytest.raises(InputError, match="not a module name"):
        module_file("pkg/train.py", tmp_path)
    with pytest.raises(InputError, match=r"-m pkg.eval: no pkg/eval.py or pkg/eval/__main__.py under"):
        module_file("pkg.eval", tmp_path)
