"""Scripts written against the frameworks users have (pytorch-lightning, transformers),
reduced through the fork server: the server must start with the framework preloaded,
drop nothing, and keep the first error.

The frameworks start thread pools at import (numpy's and scipy's OpenBLAS) and import
thousands of modules; an environment without them hides every fork-safety problem.
Skipped where a framework is not installed; ``.ci/run`` installs both.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.worker import Isolation

DATA = Path(__file__).resolve().parents[1] / "data" / "ecosystem"


def reduce_copy(name: str, tmp_path: Path, max_tests: int, keep_error: str = "out of bounds", **options):
    shutil.copy(DATA / name, tmp_path / name)
    return reduce(
        ReduceConfig(
            script=tmp_path / name, cwd=tmp_path, keep_error=keep_error, max_tests=max_tests, verify_runs=1,
            **options,
        )
    )


def assert_forked_with_everything_preloaded(result) -> None:
    assert result.isolation is Isolation.FORK, result.notes
    assert not [n for n in result.notes if "not preloaded" in n], result.notes
    assert result.preload_modules > 1000  # the framework, not just torch
    assert result.verified == (1, 1)


@pytest.mark.slow
def test_a_lightning_training_step_reduces_in_the_fork_server_without_the_trainer(tmp_path):
    pytest.importorskip("pytorch_lightning")
    result = reduce_copy("pl_train.py", tmp_path, max_tests=60)
    assert_forked_with_everything_preloaded(result)
    assert result.signature.type == "IndexError"
    assert result.signature.op.name == "torch.nn.functional.cross_entropy"
    assert result.signature.frame.function == "training_step"
    # The library is cut out of the stack: the training step is called directly.
    text = result.output.read_text()
    assert "Trainer" not in text and ".fit(" not in text
    assert ".training_step(" in text
    assert result.final_signature is not None
    assert result.signature.same_bug(result.final_signature, free=frozenset(result.varying))
    assert (tmp_path / "pl_train.call.pt").is_file()  # the saved call, beside the result
    assert "pl_train.call.pt" in result.needs


@pytest.mark.slow
def test_a_lightning_step_under_mixed_precision_is_called_directly_inside_the_autocast_lightning_entered(tmp_path):
    # precision="bf16-mixed": the bank is float32, the encoder's output bfloat16 only
    # under the autocast Lightning enters around validation_step
    pytest.importorskip("pytorch_lightning")
    result = reduce_copy("pl_bf16.py", tmp_path, max_tests=12, keep_error="Index put requires")
    assert_forked_with_everything_preloaded(result)
    text = result.output.read_text()
    assert "Trainer" not in text and ".fit(" not in text
    assert "with torch.autocast('cpu'" in text and ".validation_step(" in text
    assert result.final_signature is not None and result.signature.same_bug(result.final_signature)


@pytest.mark.slow
def test_a_transformers_trainer_is_cut_out_and_the_model_called_directly(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    result = reduce_copy("hf_trainer.py", tmp_path, max_tests=80)
    assert_forked_with_everything_preloaded(result)
    assert result.signature.message == "Target 3 is out of bounds."
    text = result.output.read_text()
    assert "Trainer" not in text and "TrainingArguments" not in text
    assert result.final_signature is not None
    assert result.signature.same_bug(result.final_signature, free=frozenset(result.varying))


@pytest.mark.slow
def test_a_transformers_models_own_loss_reduces_in_the_fork_server(tmp_path):
    pytest.importorskip("transformers")
    result = reduce_copy("hf_train.py", tmp_path, max_tests=15)
    assert_forked_with_everything_preloaded(result)
    assert result.signature.type == "IndexError"
    assert result.signature.message == "Target 3 is out of bounds."


@pytest.mark.slow
def test_a_trainers_compute_loss_override_is_called_directly_as_the_trainer_called_it(tmp_path, monkeypatch):
    # The override pops the labels from the batch the Trainer passed, and reads weights a
    # callback set and the epoch the Trainer's loop set: the direct call needs the batch
    # as it came in and those attributes of the trainer, or it fails otherwise (KeyError)
    # or not at all (no weights at epoch 0).  The search starts from that call as it
    # would for a job of hours (this one trains for seconds, under the 10 s from which a
    # start past the library is tried, and a start of torch is most of its run).
    # Without observed-sizes: with it the weights become `torch.randn(3)`, the size the
    # run saw, and the attributes this test is about are no longer read.
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from shrinkgpu.reducer import start
    from shrinkgpu.reducer import state as state_rules

    monkeypatch.setattr(state_rules, "LONG_RUN", 0.0)
    monkeypatch.setattr(start, "SLOWER_REPLAY", 10.0)
    result = reduce_copy("hf_reweight.py", tmp_path, max_tests=80, keep_error="weight tensor should be defined",
                         observed_sizes=False)
    assert_forked_with_everything_preloaded(result)
    assert result.signature.op.name == "torch.nn.functional.cross_entropy"
    text = result.output.read_text()
    assert ".compute_loss(" in text and ".train(" not in text, text
    assert "class_weights = _call['attributes']['class_weights']" in text, text
    assert result.final_signature is not None
    assert result.signature.same_bug(result.final_signature, free=frozenset(result.varying))
