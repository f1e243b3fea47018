"""report/document.py: the maintainer's report and the check it suggests, from a result
made by hand: the error as Python showed it, what the minimal example shows and where
its line is, an index check with the operator's own arguments.
"""

from __future__ import annotations

import sys

import pytest


def test_the_report_shows_the_results_own_error():
    from shrinkgpu.report import verbatim_error
    from shrinkgpu.signature import Signature

    sig = Signature("IndexError", "Target 5 is out of bounds.", "Target <n> is out of bounds.", None, None)
    assert verbatim_error(sig) == "IndexError: Target 5 is out of bounds."


@pytest.mark.parametrize("source, op, dim_argument", [
    # a method: the tensor it is called on is the input, the call's arguments start at dim
    ("self.table.gather(-1, torch.randint(1, self.T + 1, (64,)))", "Tensor.gather", "args[1]=-1"),
    ("deg.index_add_(0, dst, torch.ones(1332))", "Tensor.index_add_", "args[1]=0"),
    ("torch.gather(self.table, -1, idx)", "torch.gather", "args[1]=-1"),
])
def test_the_suggested_index_check_passes_the_operators_own_arguments(source, op, dim_argument):
    from shrinkgpu.report.document import suggest_check
    from shrinkgpu.signature import ExceptionRecord, Frame, OpRecord, Signature, TensorMeta

    sig = Signature.from_record(ExceptionRecord(
        "RuntimeError", "index 1000 is out of bounds for dimension 0 with size 1000",
        frame=Frame("ddpm.py", 21, "loss", source),
        op=OpRecord(op, (TensorMeta("args[0]", "float32", (1000,), (1,), "cpu"),
                         TensorMeta("args[2]", "int64", (64,), (1,), "cpu")), (), (dim_argument,)),
    ))
    check = suggest_check(sig)
    call = check.splitlines()[1]
    expected = {
        "Tensor.gather": "validate_index(self.table, -1, torch.randint(1, self.T + 1, (64,)))",
        "Tensor.index_add_": "validate_index(deg, 0, dst)",
        "torch.gather": "validate_index(self.table, -1, idx)",
    }[op]
    assert call.startswith(expected + "  # before "), check


def _hand_made_result(tmp_path, text: str, **changes):
    from shrinkgpu.results import OracleStats, ReductionResult
    from shrinkgpu.signature import ExceptionRecord, Frame, OpRecord, Signature, TensorMeta
    from shrinkgpu.worker import Isolation

    def sig(line: int) -> Signature:
        return Signature.from_record(ExceptionRecord(
            "RuntimeError", "index 1000 is out of bounds for dimension 0 with size 1000",
            frame=Frame("ddpm.py", line, "loss", "table.gather(-1, t)"),
            op=OpRecord("Tensor.gather", (TensorMeta("args[0]", "float32", (1000,), (1,), "cpu"),), ()),
        ))

    fields = dict(
        output=tmp_path / "ddpm.min.py", report=tmp_path / "ddpm.min.md", files={"ddpm.py": text}, main="ddpm.py",
        signature=sig(140), final_signature=sig(4), tokens_before=1800, tokens_after=40, candidates_tested=10,
        oracle=OracleStats(), seconds=1.0, stopped=None, verified=(1, 1), isolation=Isolation.FORK,
        preload_modules=0, timeout=5.0,
    )
    fields.update(changes)
    return ReductionResult(**fields)


def test_the_report_says_what_the_minimal_example_shows_and_where_its_line_is(tmp_path):
    from shrinkgpu.report import render_report
    from shrinkgpu.worker import ScriptSpec

    spec = ScriptSpec(script=tmp_path / "ddpm.py", cwd=tmp_path)
    target = tmp_path / "ddpm.min.py"
    plain = "import torch\ntable = torch.zeros(1000)\nt = torch.tensor([1000])\ntable.gather(-1, t)\n"
    report = render_report(_hand_made_result(tmp_path, plain), spec, target)
    # the result's own line, under the result's own name (it ran as ddpm.py)
    assert "| where | `ddpm.min.py:4` in `loss`" in report
    assert "so it still shows where the bad values come from." in report
    library = ("import pathlib\nimport torch\nf(*torch.load(pathlib.Path(__file__).with_name('ddpm.call.pt'))"
               "['args'])\n")
    report = render_report(_hand_made_result(tmp_path, library), spec, target)
    assert "where the bad values come from" not in report
    assert "loaded from `ddpm.call.pt`: it shows the failing call, not where those values came from." in report
    stopped = render_report(_hand_made_result(tmp_path, plain, stopped="--max-time 300s reached"), spec, target)
    assert "before the search stopped (--max-time 300s reached), not a finished reduction." in stopped


def test_the_report_says_first_which_artifact_runs_alone_and_shows_it_first(tmp_path):
    from shrinkgpu.report import render_report
    from shrinkgpu.results import Extraction
    from shrinkgpu.worker import ScriptSpec

    spec = ScriptSpec(script=tmp_path / "ddpm.py", cwd=tmp_path)
    target = tmp_path / "ddpm.min.py"
    plain = "import torch\ntable = torch.zeros(1000)\nt = torch.tensor([1000])\ntable.gather(-1, t)\n"
    loading = "import torch\nf(*torch.load(pathlib.Path(__file__).with_name('ddpm.call.pt'))['args'])\n"
    call = "import torch\n\ntorch.zeros(1000).gather(-1, torch.tensor([1000]))\n"
    extraction = Extraction(tmp_path / "ddpm.extracted.py", None, call, "metadata", 1,
                            _hand_made_result(tmp_path, plain).signature)

    def rendered(text: str, alone: dict, **changes) -> str:
        report = render_report(_hand_made_result(tmp_path, text, alone=alone, **changes), spec, target)
        return report.split("### 🐛 Describe the bug", 1)[1]

    bug = rendered(plain, {"artifact": "result", "file": "ddpm.min.py", "checked": True, "result_needs": []},
                   extracted=extraction)
    assert bug.split("\n")[4] == ("**Runs alone:** `ddpm.min.py`, with no file beside it (checked: alone in an "
                                   "empty directory it fails the same way).")
    assert bug.index(plain.splitlines()[1]) < bug.index(call.splitlines()[2])
    # the result loads the library's call: the extracted call runs alone, and comes first
    bug = rendered(loading, {"artifact": "extracted call", "file": "ddpm.extracted.py", "checked": True,
                             "result_needs": ["it loads `ddpm.call.pt`"]}, extracted=extraction)
    assert bug.split("\n")[4] == ("**Runs alone:** `ddpm.extracted.py`, the failing call alone (checked: alone in "
                                   "an empty directory it fails the same way); `ddpm.min.py` does not: it loads "
                                   "`ddpm.call.pt`.")
    assert bug.index(call.splitlines()[2]) < bug.index(loading.splitlines()[1])
    # neither: the result written back as source, shown before both
    back = "import torch\nf(torch.randn(32, 4))\n"
    bug = rendered(loading, {"artifact": "result written back", "file": "ddpm.min.alone.py", "checked": True,
                             "result_needs": ["it loads `ddpm.call.pt`"]}, written_back=back)
    assert bug.split("\n")[4].startswith("**Runs alone:** `ddpm.min.alone.py`, the minimal example with the call "
                                          "it loads written as source")
    assert bug.index("f(torch.randn(32, 4))") < bug.index(loading.splitlines()[1])
    bug = rendered(loading, {"artifact": None, "file": None, "checked": False,
                             "result_needs": ["it loads `ddpm.call.pt`"]}, extract_error="no torch call raised it")
    assert bug.split("\n")[4] == ("**Nothing here runs alone:** `ddpm.min.py` does not: it loads `ddpm.call.pt`; "
                                   "the failing call was not extracted (no torch call raised it).")


def test_the_command_that_runs_the_result_is_quoted_and_run_where_it_must(tmp_path):
    from shrinkgpu.launch import Launch
    from shrinkgpu.report.document import reproduce_command
    from shrinkgpu.worker import ScriptSpec

    spec = ScriptSpec(script=tmp_path / "train.py", args=("--data", "my data"), cwd=tmp_path)
    assert reproduce_command(spec, tmp_path / "train.min.py", "train.py") == "python train.min.py --data 'my data'"
    (tmp_path / "x y.min").mkdir()
    assert (reproduce_command(spec, tmp_path / "x y.min", "train.py")
            == "cd 'x y.min' && python train.py --data 'my data'")
    data = tmp_path / "data"
    assert reproduce_command(spec, tmp_path / "train.min.py", "train.py", run_from=data) == (
        f"cd {data} && python {(tmp_path / 'train.min.py').resolve()} --data 'my data'")
    ranks = Launch(nproc=2, ranks=True)
    assert reproduce_command(spec, tmp_path / "train.min.py", "train.py", launch=ranks) == (
        "torchrun --standalone --nproc-per-node=2 train.min.py --data 'my data'")
    env = {"PYTHONHASHSEED": "0", "CUDA_LAUNCH_BLOCKING": "1"}
    assert reproduce_command(spec, tmp_path / "train.min.py", "train.py", env=env) == (
        "CUDA_LAUNCH_BLOCKING=1 PYTHONHASHSEED=0 python train.min.py --data 'my data'")
    # the variables go to the program, not to the ``cd`` before it
    assert reproduce_command(spec, tmp_path / "x y.min", "train.py", launch=ranks, env=env) == (
        "cd 'x y.min' && CUDA_LAUNCH_BLOCKING=1 PYTHONHASHSEED=0 torchrun --standalone --nproc-per-node=2 train.py "
        "--data 'my data'")
    # a folder whose name holds `` && `` is still the ``cd``'s, not the program's
    (tmp_path / "a && b.min").mkdir()
    assert reproduce_command(spec, tmp_path / "a && b.min", "train.py", env={"PYTHONHASHSEED": "0"}) == (
        "cd 'a && b.min' && PYTHONHASHSEED=0 python train.py --data 'my data'")


def test_the_command_of_a_result_in_a_folder_runs_the_program_with_the_variables_it_needs(tmp_path):
    import subprocess

    from shrinkgpu.report.document import reproduce_command
    from shrinkgpu.worker import ScriptSpec

    folder = tmp_path / "x.min"
    folder.mkdir()
    (folder / "train.py").write_text("import os\nprint(os.environ.get('PYTHONHASHSEED'), "
                                     "os.environ.get('CUDA_LAUNCH_BLOCKING'))\n")
    spec = ScriptSpec(script=tmp_path / "train.py", cwd=tmp_path)
    command = reproduce_command(spec, folder, "train.py", env={"PYTHONHASHSEED": "7", "CUDA_LAUNCH_BLOCKING": "1"})
    ran = subprocess.run(["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.split() == ["7", "1"]


def test_the_report_names_the_files_the_loops_wrote_and_that_they_may_hold_weights(tmp_path):
    from shrinkgpu.report import render_report
    from shrinkgpu.worker import ScriptSpec

    spec = ScriptSpec(script=tmp_path / "ddpm.py", cwd=tmp_path)
    text = ("import shutil\nimport pathlib\nshutil.copytree(pathlib.Path(__file__).with_name('ddpm.min.files'), '.', "
            "dirs_exist_ok=True)\nimport torch\ntable = torch.zeros(1000)\ntable.gather(-1, torch.tensor([1000]))\n")
    files = tmp_path / "ddpm.min.files"
    result = _hand_made_result(tmp_path, text, data_files={"ddpm.min.files": files})
    report = render_report(result, spec, tmp_path / "ddpm.min.py")
    line = next(ln for ln in report.splitlines() if ln.startswith("- `ddpm.min.files/`"))
    assert "the files the original's loops wrote before the failure after them" in line
    assert "They may hold your weights" in line
    # nothing said when the result copies nothing
    plain = render_report(_hand_made_result(tmp_path, "import torch\n"), spec, tmp_path / "ddpm.min.py")
    assert "ddpm.min.files" not in plain
