"""Where a reduction writes: one rule for every file beside the result."""

from pathlib import Path

from shrinkgpu.layout import OutputLayout, case_file


def test_every_companion_is_named_from_the_result_without_py():
    layout = OutputLayout(Path("/w/out/train.min.py"))
    assert layout.directory == Path("/w/out/train.min")
    assert layout.report == Path("/w/out/train.min.md")
    assert layout.case == Path("/w/out/train.min.json")
    assert layout.extracted_stem == Path("/w/out/train")
    assert (layout.data_stem, layout.data_dir) == ("train.min", Path("/w/out"))
    assert layout.first_run == Path("/w/out/train.min.first")
    assert layout.ours() == (Path("/w/out/train.min.py"), Path("/w/out/train.min"), Path("/w/out/train.min.md"),
                             Path("/w/out/train.min.first"))


def test_an_output_without_py_is_its_own_base():
    layout = OutputLayout(Path("/w/repro"))
    assert (layout.directory, layout.report, layout.case) == (Path("/w/repro"), Path("/w/repro.md"),
                                                              Path("/w/repro.json"))
    assert layout.extracted_stem == Path("/w/repro")


def test_one_file_goes_to_the_output_several_to_the_directory():
    layout = OutputLayout.beside(Path("/w/train.py"))
    assert layout.output == Path("/w/train.min.py")
    assert layout.placed({"train.py": "a\n"}, "train.py") == (Path("/w/train.min.py"), {Path("/w/train.min.py"): "a\n"})
    target, paths = layout.placed({"train.py": "a\n", "pkg/m.py": "b\n"}, "train.py")
    assert target == Path("/w/train.min")
    assert paths == {Path("/w/train.min/train.py"): "a\n", Path("/w/train.min/pkg/m.py"): "b\n"}


def test_verify_finds_the_case_file_of_either_kind_of_result():
    assert case_file(Path("/w/train.min.py")) == Path("/w/train.min.json")
    assert case_file(Path("/w/train.min")) == Path("/w/train.min.json")
    assert case_file(Path("/w/train.min.json")) == Path("/w/train.min.json")
