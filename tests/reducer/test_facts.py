"""reducer/facts.py: what a run tells the passes, decoded from its observation."""

from __future__ import annotations

from shrinkgpu.reducer.facts import library_cut
from shrinkgpu.worker import Observation, Sandbox, ScriptSpec

MAIN = """\
import torch as T
import lightning


def main():
    model = Net(T.zeros(2))
    trainer = lightning.Trainer()
    trainer.fit(model)
"""


def cut_of(tmp_path, **recorded):
    """The cut fact of a first run that cut ``trainer.fit(model)`` (``recorded``: more of
    the probe's record), and the files it needs."""
    (tmp_path / "train.py").write_text(MAIN)
    saved = tmp_path / "call.pt"
    saved.write_bytes(b"x")
    obs = Observation(1, None, False, 1.0, "exception", None, cut={
        "file": "train.py", "line": 8, "source": "trainer.fit(model)", "object": "model",
        "entry": "fit", "method": "training_step", "library": "Trainer.fit", **recorded,
    })
    spec = ScriptSpec(script=tmp_path / "train.py", cwd=tmp_path)
    with Sandbox(tmp_path) as sandbox:
        return library_cut(obs, spec, sandbox, saved, {"train.py": MAIN})


def test_the_cut_loads_its_call_through_the_names_the_file_imports(tmp_path):
    cut, data = cut_of(tmp_path)
    # inside main(), an ``import torch`` would make the name local to all of it: the
    # file's own ``T`` is used, and only pathlib, which the file does not import, is
    assert cut.replacement == (
        "import pathlib\n"
        "_call = T.load(pathlib.Path(__file__).with_name('train.call.pt'), weights_only=False)\n"
        "model.training_step(*_call['args'], **_call['kwargs'])\n"
    )
    assert data == {"train.call.pt": tmp_path / "call.pt"}


def test_the_receivers_attributes_the_library_set_are_restored_one_statement_each(tmp_path):
    # (a Trainer subclass whose callback set ``class_weights`` and whose loop set the
    # epoch: each a statement, for deletion to drop when the bug does not need it)
    cut, _ = cut_of(tmp_path, attributes=["class_weights", "state", "not an identifier"])
    assert cut.replacement.splitlines()[2:] == [
        "model.class_weights = _call['attributes']['class_weights']",
        "model.state = _call['attributes']['state']",
        "model.training_step(*_call['args'], **_call['kwargs'])",
    ]


def test_tensors_are_drawn_afresh_only_for_errors_their_layout_alone_raises(tmp_path):
    from fakes import SCRIPT, Contexts, bug, config, signature
    from shrinkgpu.reducer.facts import build_program
    from shrinkgpu.signature import Target

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    sizes = (
        {"file": "train.py", "function": "<module>", "expression": "len(data)", "literal": "3"},
        {"file": "train.py", "function": "<module>", "expression": "x", "literal": "torch.randn(4, 3)",
         "kind": "tensor"},
    )
    contexts = Contexts()
    try:
        for sig, kept in [
            (signature(), ["len(data)"]),  # an index out of bounds: the values matter, no tensor is drawn
            (signature("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x2)",
                       op="torch._C._nn.linear"), ["len(data)", "x"]),
        ]:
            ctx = contexts(config(script, keep_error=None))
            inp = build_program(ctx, bug(sig, sizes=sizes), Target(sig))
            assert [s.expression for s in inp.program.facts.sizes] == kept
            assert inp.facts.sizes == inp.program.facts.sizes  # what every later program carries
    finally:
        contexts.close()


def test_a_run_without_its_modules_still_takes_the_local_modules_its_script_imports(tmp_path):
    from shrinkgpu.reducer.facts import local_files

    (tmp_path / "train.py").write_text("import torch\nfrom metrics import Meter\nimport helpers.io\n")
    (tmp_path / "metrics.py").write_text("class Meter: pass\n")
    spec = ScriptSpec(script=tmp_path / "train.py", cwd=tmp_path)
    died = Observation(None, 6, False, 1.0, "signal", None)  # a rank killed before its probe reported
    assert sorted(local_files(died, spec)) == ["metrics.py", "train.py"]


IDS = {"dtype": "int64", "shape": [3], "stride": [1], "offset": 0, "device": "cpu", "values": [1, 9, 3]}
BATCH = {"dtype": "float32", "shape": [32, 4], "stride": [4, 1], "offset": 0, "device": "cpu"}


def test_a_call_of_small_tensors_is_written_as_source_and_loads_nothing(tmp_path):
    cut, data = cut_of(tmp_path, attributes=["epoch"], call={
        "args": [{"t": "args[0]"}, {"lit": "0"}], "kwargs": {"mode": {"lit": "'train'"}},
        "attributes": {"epoch": {"lit": "3"}}, "meta": {"args[0]": IDS}})
    assert cut.replacement == ("model.epoch = 3\n"
                               "model.training_step(T.tensor([1, 9, 3], dtype=T.int64), 0, mode='train')\n")
    assert data == {} and cut.loads == "" and cut.cost == 0
    # the same call at the layout level, for a result that would load it
    assert cut.layout == (("T.tensor([1, 9, 3], dtype=T.int64)", "0"), (("mode", "'train'"),), (("epoch", "3"),))


def test_a_call_of_large_tensors_loads_its_file_and_counts_what_that_stands_for(tmp_path):
    cut, data = cut_of(tmp_path, call={"args": [{"t": "args[0]"}], "kwargs": {}, "attributes": {},
                                       "meta": {"args[0]": BATCH}})
    assert "_call = T.load(" in cut.replacement and data == {"train.call.pt": tmp_path / "call.pt"}
    assert cut.loads == "train.call.pt"
    # what the pickle stands for: its batch drawn afresh, ``T.randn(32, 4)``
    assert cut.layout == (("T.randn(32, 4)",), (), ())
    assert cut.cost == 8  # its tokens: T . randn ( 32 , 4 )


def test_literals_that_cost_more_than_loading_the_call_are_not_written(tmp_path):
    # sixty-four floats of a batch written out are hundreds of tokens: a cut that large
    # would never be smaller than the framework it replaces, so the call is loaded (and
    # counted as its batch drawn afresh)
    values = [0.123456789 * i for i in range(64)]
    floats = {"dtype": "float32", "shape": [8, 8], "stride": [8, 1], "offset": 0, "device": "cpu",
              "values": [values[i:i + 8] for i in range(0, 64, 8)]}
    cut, data = cut_of(tmp_path, call={"args": [{"t": "args[0]"}], "kwargs": {}, "attributes": {},
                                       "meta": {"args[0]": floats}})
    assert "_call = T.load(" in cut.replacement and data == {"train.call.pt": tmp_path / "call.pt"}
    assert cut.loads == "train.call.pt" and cut.layout == (("T.randn(8, 8)",), (), ())
