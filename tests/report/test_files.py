"""report/files.py: the files a reduction writes: the result laid out as a person would,
and the best program so far, marked partial, where ``--resume`` reads it back."""

from __future__ import annotations

from shrinkgpu.layout import OutputLayout
from shrinkgpu.report.files import PARTIAL_MARK, PartialWriter, read_partial, tidy_layout


def test_the_layout_is_blank_lines_only_two_around_definitions_none_at_the_top():
    text = "\n\nimport torch\ndef f(x):\n    return x\nclass Net:\n    pass\ny = f(1)\n"
    assert tidy_layout(text) == (
        "import torch\n\n\ndef f(x):\n    return x\n\n\nclass Net:\n    pass\n\n\ny = f(1)\n")
    assert tidy_layout("x = (\n") == "x = (\n"  # what does not parse is left as it is


def test_the_best_program_so_far_is_written_marked_partial_and_read_back_without_the_mark(tmp_path):
    layout = OutputLayout(tmp_path / "train.min.py")
    writer = PartialWriter(layout, interval=3600.0)
    # the first is written
    writer.offer({"train.py": "# -*- coding: utf-8 -*-\nimport torch\nexplode(3)\n"}, "train.py")
    writer.offer({"train.py": "explode(3)\n"}, "train.py")  # within the interval: kept for flush
    first = layout.output.read_text()
    assert first.splitlines()[0] == "# -*- coding: utf-8 -*-"  # a coding declaration stays first
    assert first.splitlines()[1].startswith(PARTIAL_MARK + " (the search was still going): not verified")
    writer.flush()
    assert layout.output.read_text().startswith(PARTIAL_MARK) and layout.output.read_text().endswith("\nexplode(3)\n")
    assert read_partial(layout, "train.py") == {"train.py": "explode(3)\n"}


def test_a_partial_program_of_several_files_is_a_directory_read_back_whole(tmp_path):
    layout = OutputLayout(tmp_path / "train.min.py")
    PartialWriter(layout).offer({"train.py": "import heads\nheads.f()\n", "heads.py": "def f():\n    explode(3)\n"},
                                "train.py")
    assert not layout.output.exists() and layout.directory.is_dir()
    assert read_partial(layout, "train.py") == {"train.py": "import heads\nheads.f()\n",
                                                "heads.py": "def f():\n    explode(3)\n"}
    assert read_partial(layout, "main.py") is None  # not the program asked for
    assert read_partial(OutputLayout(tmp_path / "other.min.py"), "train.py") is None
