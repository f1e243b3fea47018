"""A failure after the loops that reads what they wrote (issue 48, item 4): the failing
loader's call (a module's or an optimizer's ``load_state_dict``, ``torch.load``,
``json.load``) extracted alone, with
the file it read beside it when the bug needs its bytes, and the report saying what that
file holds.  End to end: real workers, real torch on the CPU; each extracted script is
checked in a fresh interpreter, alone in an empty directory."""

from __future__ import annotations

import os
import re
import textwrap

import pytest
import torch

from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.reducer.extraction import extract_call
from shrinkgpu.signature import Target

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("short_scripts_stay_short")]

RESUMABLE_CHECKPOINT = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.out = nn.Linear(width, vocab)

    def forward(self, x):
        return self.out(self.emb(x))


net = Net(50, 8)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
best = None
for epoch in range(3):
    loss = net(torch.randint(0, 50, (4,))).logsumexp(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if best is None or loss.item() < best:
        best = loss.item()
        torch.save({"epoch": epoch, "model": net.state_dict()}, "best.pt")

net = Net(50, 8)
with open("best.pt", "rb") as f:
    net.load_state_dict(torch.load(f))
"""

# a buffer of 100 positions: too many values to write inline, so the state dict is read
# from the file as it was passed
POSITIONS_RESIZED = """\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.register_buffer("positions", torch.arange(100))


trained = Encoder(16)
torch.save(trained.state_dict(), "encoder.pt")
Encoder(12).load_state_dict(torch.load("encoder.pt"))
"""

NAMESPACE_IN_CHECKPOINT = """\
import argparse

import torch

args = argparse.Namespace(lr=0.1, epochs=2)
w = torch.zeros(3, requires_grad=True)
for epoch in range(args.epochs):
    w.data -= args.lr
torch.save({"w": w.detach(), "args": args}, "last.pt")
state = torch.load("last.pt")
"""

HEAD_ONLY_FINETUNE = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
for step in range(2):
    opt.zero_grad()
    model(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, "best.pt")

ckpt = torch.load("best.pt")
head = torch.optim.AdamW(model[2].parameters(), lr=1e-3, weight_decay=1e-4)
head.load_state_dict(ckpt["optimizer"])  # the whole model's groups, into the head's
"""

HISTORY_WRITTEN_TWICE = """\
import json

history = {"loss": []}
with open("history.json", "w") as out:
    for epoch in range(2):
        history["loss"].append(1.0 / (epoch + 1))
        json.dump(history, out)  # once per epoch, into one file

with open("history.json") as f:
    print(json.load(f)["loss"][-1])
"""


def _extract(tmp_path, text: str, keep: str):
    script = tmp_path / "job" / "train.py"
    script.parent.mkdir()
    script.write_text(text)
    _first, extraction = extract_call(ReduceConfig(script=script, keep_error=keep, env={**os.environ}))
    assert Target(_first.observation.signature).matches(extraction.signature)
    return script, extraction


def test_load_state_dict_of_a_whole_checkpoint_is_extracted_with_the_module_built_by_its_class(tmp_path):
    script, extraction = _extract(tmp_path, RESUMABLE_CHECKPOINT, r"Unexpected key\(s\) in state_dict")
    # (which epoch was best is the run's: the check reads keys and shapes)
    text = re.sub(r"'epoch': \d,", "'epoch': N,", extraction.text)
    assert text.endswith(textwrap.dedent("""\
        class Net(nn.Module):
            def __init__(self, vocab, width):
                super().__init__()
                self.emb = nn.Embedding(vocab, width)
                self.out = nn.Linear(width, vocab)

            def forward(self, x):
                return self.out(self.emb(x))


        model = Net(50, 8)
        state_dict = {
            'epoch': N,
            'model': {
                'emb.weight': torch.randn(50, 8),
                'out.weight': torch.randn(50, 8),
                'out.bias': torch.randn(50),
            },
        }
        model.load_state_dict(state_dict)
        """))
    assert extraction.text.startswith("import torch\nfrom torch import nn\n")
    # no file beside it: the keys and shapes are the bug, random weights carry them
    assert extraction.data is None and extraction.level == "metadata" and extraction.loader
    assert extraction.signature.op.name == "torch.nn.modules.module.Module.load_state_dict"
    assert sorted(p.name for p in script.parent.iterdir()) == ["train.extracted.py", "train.py"]


def test_a_state_dict_whose_values_cannot_be_written_is_read_from_the_file_beside_it(tmp_path):
    script, extraction = _extract(tmp_path, POSITIONS_RESIZED, r"size mismatch for proj.weight")
    assert extraction.text.splitlines()[-2:] == ["model = Encoder(12)",
                                                  "model.load_state_dict(torch.load('train.extracted.pt'))"]
    assert extraction.level == "exact" and extraction.data == script.with_name("train.extracted.pt")
    assert extraction.holds.startswith("the state dict the failing call was given (3 tensors, ")
    assert extraction.holds.endswith("): the user's weights")
    saved = torch.load(extraction.data)
    assert saved["proj.weight"].shape == (16, 16) and torch.equal(saved["positions"], torch.arange(100))


def test_torch_load_that_refuses_the_checkpoint_is_extracted_with_the_file_it_read(tmp_path):
    script, extraction = _extract(tmp_path, NAMESPACE_IN_CHECKPOINT, r"Weights only load failed")
    assert extraction.text == "import torch\n\ntorch.load('train.extracted.pt')\n"
    assert extraction.data == script.with_name("train.extracted.pt")
    # the very bytes the run wrote (the run's own copy went with its directory)
    assert torch.load(extraction.data, weights_only=False)["args"].epochs == 2
    assert extraction.holds.startswith("`last.pt` as the run wrote it (") and "the user's weights" in extraction.holds
    # the path the call was given is where its bytes were, not the bug: the strict rule
    # holds although the extracted call names another file
    assert extraction.signature.op.name == "torch.serialization.load"
    assert not any(a.startswith("f=") for a in extraction.signature.op.arguments)


def test_an_optimizers_load_state_dict_is_extracted_as_the_optimizer_over_its_parameters_shapes(tmp_path):
    script, extraction = _extract(tmp_path, HEAD_ONLY_FINETUNE, r"doesn't match the size of optimizer's group")
    assert extraction.text == textwrap.dedent("""\
        import torch

        optimizer = torch.optim.AdamW([torch.zeros(s) for s in [(2, 8), (2,)]], weight_decay=0.0001)
        optimizer.load_state_dict(torch.load('train.extracted.pt'))
        """)
    # (its state is keyed by parameter number: no source form, so the file holds it)
    assert extraction.data == script.with_name("train.extracted.pt") and extraction.level == "exact"
    assert extraction.holds.startswith("the state dict the failing call was given (12 tensors, ")
    assert extraction.holds.endswith("the optimizer's state from the user's training (its moments, its step)")
    assert len(torch.load(extraction.data)["param_groups"][0]["params"]) == 4


def test_json_load_of_a_file_written_twice_is_extracted_with_its_text_inline(tmp_path):
    script, extraction = _extract(tmp_path, HISTORY_WRITTEN_TWICE, r"Extra data")
    assert extraction.text == textwrap.dedent("""\
        import io
        import json

        json.load(io.StringIO('{"loss": [1.0]}{"loss": [1.0, 0.5]}'))
        """)
    assert extraction.data is None and extraction.signature.frame.callee == "json.load"


def test_a_reduction_reports_the_failing_load_alone(tmp_path):
    script = tmp_path / "job" / "train.py"
    script.parent.mkdir()
    script.write_text(POSITIONS_RESIZED)
    out = tmp_path / "out" / "train.min.py"
    result = reduce(ReduceConfig(script=script, keep_error=r"size mismatch for proj.weight", output=out,
                                 verify_runs=1, confirm=0, max_tests=20, jobs=1, ablate=False, env={**os.environ}))
    assert Target(result.signature).matches(result.final_signature)
    assert result.extracted is not None and result.extracted.data == out.with_name("train.extracted.pt")
    report = out.with_suffix(".md").read_text()
    assert ("The failing load alone, `train.extracted.py` (the call as the program made it, rebuilt from what "
            "it was given; `train.extracted.pt` beside it is the state dict the failing call was given "
            "(3 tensors, ") in report
    assert "model.load_state_dict(torch.load('train.extracted.pt'))" in report


def test_resume_keeps_an_extracted_load_while_the_file_it_reads_is_beside_it(tmp_path):
    from conftest import first_error
    from shrinkgpu.extract import check_extracted
    from shrinkgpu.worker import default_executor

    target = Target(first_error(tmp_path, "train.py", HISTORY_WRITTEN_TWICE))
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.extracted.json").write_text('{"loss": [1.0]}{"loss": [1.0, 0.5]}')
    script = out / "train.extracted.py"
    script.write_text("import json\n\njson.load(open('train.extracted.json'))\n")
    kept = check_extracted(script, target, 60, None, default_executor)
    assert kept is not None and kept.loader and kept.level == "exact"
    assert kept.data == out / "train.extracted.json" and kept.op == "json.load"
    (out / "train.extracted.json").unlink()  # without it, the call fails otherwise (FileNotFoundError)
    assert check_extracted(script, target, 60, None, default_executor) is None
