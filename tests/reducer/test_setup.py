"""reducer/setup.py: before any work, how the user runs the script (which directory every
run gets a copy of), the program's text, and the outputs refused."""

from __future__ import annotations

import json

import pytest

from fakes import signature
from shrinkgpu.layout import OutputLayout
from shrinkgpu.reducer import ReduceConfig
from shrinkgpu.reducer.config import ReduceError
from shrinkgpu.reducer.setup import check_output, imported_files, main_source, missing_file_hint, spec_for


def config(script, **kw) -> ReduceConfig:
    """What ``shrinkgpu reduce SCRIPT`` asks, run from ``cwd``."""
    return ReduceConfig(script=script, keep_error="out of bounds", write=False, **kw)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text("import heads\nfrom models.net import Net\nimport torch\n")
    (tmp_path / "scripts" / "heads.py").write_text("H = 1\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "net.py").write_text("class Net: pass\n")
    return tmp_path


def test_a_script_inside_the_working_directory_runs_in_a_copy_of_it_as_python_would(repo):
    spec = spec_for(config("scripts/train.py", cwd=repo))
    assert (spec.script, spec.root_dir, spec.cwd) == (repo / "scripts" / "train.py", repo, repo)
    assert spec.argv0 == "scripts/train.py"
    elsewhere = spec_for(config(repo / "scripts" / "train.py", cwd=repo / "models"))
    assert elsewhere.root_dir == repo / "scripts"  # outside the working directory: its own directory
    rooted = spec_for(config(repo / "scripts" / "train.py", cwd=repo / "scripts", root=repo))
    assert rooted.root_dir == repo


def test_a_script_that_is_not_there_or_outside_root_is_a_usage_error(repo):
    for kw, said in (({"script": "scripts/nope.py"}, "scripts/nope.py: no such file"),
                     ({"script": "scripts"}, "scripts: not a file"),
                     ({"script": "scripts/train.py", "root": repo / "models"}, "is not inside --root")):
        with pytest.raises(ReduceError, match=said) as caught:
            spec_for(config(kw.pop("script"), cwd=repo, **kw))
        assert caught.value.exit_code == 2


def test_a_notebook_runs_as_the_script_of_its_code_cells(repo):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# notes"]},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1, "source": ["x = 1\n", "y = x"]}]
    (repo / "demo.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    cfg = config("demo.ipynb", cwd=repo)
    spec = spec_for(cfg)
    assert spec.script.parent == repo and spec.script.suffix == ".py" and spec.argv0 == spec.script.name
    text, notes = main_source(cfg, spec)
    assert "x = 1\ny = x" in text
    assert notes[0] == "the notebook demo.ipynb: its code cells, in order"


def test_the_local_files_the_script_imports_are_known_before_it_runs(repo):
    cfg = config("scripts/train.py", cwd=repo)
    found = set(imported_files(spec_for(cfg), cfg))
    assert found == {repo / "scripts" / "heads.py", repo / "models" / "__init__.py", repo / "models" / "net.py"}


def test_an_output_over_the_input_or_a_file_of_the_program_is_refused(repo):
    cfg = config("scripts/train.py", cwd=repo)
    spec = spec_for(cfg)
    check_output(OutputLayout(repo / "scripts" / "train.min.py"), spec)  # beside it: fine
    with pytest.raises(ReduceError, match="refusing to write the output over the input"):
        check_output(OutputLayout(repo / "scripts" / "train.py"), spec)
    with pytest.raises(ReduceError, match="it is one of the script's own files"):
        check_output(OutputLayout(repo / "scripts" / "heads.py"), spec, imported_files(spec, cfg))
    with pytest.raises(ReduceError, match="is a directory; give a file name such as"):
        check_output(OutputLayout(repo / "models"), spec)
    with pytest.raises(ReduceError, match="is a file, not a directory"):
        check_output(OutputLayout(repo / "scripts" / "heads.py" / "x.py"), spec)


def test_a_missing_file_says_where_runs_happen(repo):
    spec = spec_for(config("scripts/train.py", cwd=repo))
    hint = missing_file_hint(signature("FileNotFoundError", "[Errno 2] No such file or directory: 'data.csv'", op=None),
                             spec)
    assert hint == (f"\nEvery run works in a copy of {repo} with the working directory at the same place in it (.). "
                    "If the script reads files outside that directory, give --root a directory that holds them, or "
                    "run shrinkgpu from the directory you run python from.")
    assert missing_file_hint(signature(), spec) == ""
