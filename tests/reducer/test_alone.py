"""reducer/alone.py: which artifact runs alone, with a fake executor: each test hands the
phase a verified result (its program and facts), the extraction and the bug, and the
fake says how a run alone in an empty directory ends."""

from __future__ import annotations

from pathlib import Path

from fakes import bug, config, passes, signature
from shrinkgpu.reducer.alone import EXTRACTED, RESULT, WRITTEN_BACK, self_contained
from shrinkgpu.reducer.extraction import Extracted
from shrinkgpu.reducer.verification import Verified
from shrinkgpu.results import Extraction
from shrinkgpu.signature import Target
from shrinkgpu.syntax import CutRecord, Facts, Program, SavedObject
from shrinkgpu.worker import Isolation

LOADED = (
    "import pathlib\n"
    "import torch\n"
    "_call = torch.load(pathlib.Path(__file__).with_name('train.call.pt'), weights_only=False)\n"
    "torch.stack(*_call['args'])\n"
)
CUT = CutRecord("train.py", "trainer.fit(model)", "", "Trainer.fit", loads="train.call.pt", cost=12,
                layout=(("[torch.randn(3), torch.randn(2)]",), (), ()))


def verified(text: str, facts: Facts | None = None) -> Verified:
    program = Program({"train.py": text}, "train.py", facts)
    return Verified(program.initial(), (1, 1), signature(), None)


def no_extraction() -> Extracted:
    return Extracted(None, "not extracted")


def alone_of(ctx, text, facts=None, extracted=None, reads=()):
    return self_contained(ctx, verified(text, facts), extracted or no_extraction(), Target(signature()), reads,
                          ranks=False)


def test_a_result_that_loads_nothing_and_fails_the_same_way_alone_is_the_artifact(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text("explode(3)\n")
    ctx = contexts(config(script))
    alone = alone_of(ctx, "explode(3)\n")
    assert (alone.artifact, alone.checked, alone.because) == (RESULT, True, ())
    # one run, in a fresh interpreter, of the result as it is
    assert [iso for iso, _ in ctx.executors.log.jobs] == [Isolation.FRESH]
    assert ctx.executors.log.texts == ["explode(3)\n"]
    assert alone.to_json({RESULT: "train.min.py"}) == {"artifact": RESULT, "file": "train.min.py", "checked": True,
                                                       "result_needs": []}


def test_a_result_that_passes_alone_falls_to_the_extracted_call_and_says_why(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text("explode(3)\n")
    ctx = contexts(config(script), lambda text, job: passes())
    extraction = Extraction(tmp_path / "train.extracted.py", None, "torch.stack([])\n", "metadata", 1, signature())
    alone = alone_of(ctx, "explode(3)\n", extracted=Extracted(extraction, None))
    assert alone.artifact == EXTRACTED and alone.checked
    assert alone.because == ("alone it does not fail the same way (finished without error (exit status 0))",)


def test_a_result_that_reads_a_file_is_not_run_alone(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text("explode(3)\n")
    ctx = contexts(config(script))
    alone = alone_of(ctx, "explode(3)\n", reads=("labels.json",))
    assert alone.artifact is None and alone.because == ("it reads `labels.json`",)
    assert ctx.executors.log.jobs == []


def test_a_result_that_loads_the_librarys_call_is_written_back_as_source_when_that_fails_the_same_way(
        tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LOADED)
    ctx = contexts(config(script), lambda text, job: passes() if "call.pt" in text else bug())
    alone = alone_of(ctx, LOADED, Facts(cut=CUT))
    assert alone.artifact == WRITTEN_BACK and alone.checked
    assert alone.because == ("it loads `train.call.pt`",)
    assert alone.text == "import torch\ntorch.stack([torch.randn(3), torch.randn(2)])\n"
    assert ctx.executors.log.texts == [alone.text]


def test_a_written_back_result_that_fails_otherwise_leaves_no_artifact(tmp_path, contexts):
    script = tmp_path / "train.py"
    script.write_text(LOADED)
    ctx = contexts(config(script), lambda text, job: passes())
    alone = alone_of(ctx, LOADED, Facts(cut=CUT))
    assert alone.artifact is None and alone.because == ("it loads `train.call.pt`",)
    assert any(n.startswith("the result with the call it loads from `train.call.pt` written as source")
               for n in ctx.talk.notes)


def test_a_result_that_loads_a_data_object_has_no_artifact_and_names_the_file(tmp_path, contexts):
    text = "import pickle\nrows = pickle.loads(open('train.min.rows.pkl', 'rb').read())\nexplode(3)\n"
    script = tmp_path / "train.py"
    script.write_text(text)
    ctx = contexts(config(script))
    facts = Facts(saved_objects=(SavedObject("rows", "Rows", "train.min.rows.pkl", 70_000),))
    alone = alone_of(ctx, text, facts)
    assert alone.artifact is None and alone.because == ("it loads `train.min.rows.pkl`",)
    assert ctx.executors.log.jobs == []
    assert not Path(tmp_path / "train.min.rows.pkl").exists()
