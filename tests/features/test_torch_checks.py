"""Errors raised by torch's own Python checks (issue 24, item 3): the suspect is the torch
call the user's code made (the module with its configuration, or the functional) with
its tensors, so the signature holds an operator and the failing line may change.  Real
torch in fresh interpreters."""

from __future__ import annotations

import textwrap

import pytest

from conftest import first_error
from shrinkgpu.families import Family
from shrinkgpu.reducer import ReduceConfig

LSTM = """\
import torch
import torch.nn as nn

lstm = nn.LSTM(8, 16, batch_first=True)
x = torch.randn(4, 5, 8)
h = (torch.zeros(2, 4, 16), torch.zeros(2, 4, 16))
out = lstm(x, h)
"""


def test_a_module_check_names_the_module_its_configuration_and_its_inputs(tmp_path):
    sig = first_error(tmp_path, "a.py", LSTM)
    assert sig.headline == "RuntimeError: Expected hidden[0] size (1, 4, 16), got [2, 4, 16]"
    assert sig.op is not None and sig.op.name == "torch.nn.LSTM"
    assert sig.op.arguments == ("LSTM(8, 16, batch_first=True)",)
    assert [(t.path, t.shape) for t in sig.op.tensors] == [
        ("args[0]", (4, 5, 8)), ("args[1][0]", (2, 4, 16)), ("args[1][1]", (2, 4, 16))]
    assert sig.family is Family.SHAPE
    # the failing line rewritten: the same call, the same bug
    assert sig.same_bug(first_error(tmp_path, "b.py", LSTM.replace("out = lstm(x, h)", "y, _ = lstm(x, h)")))
    # another configuration of the module is another bug
    wider = LSTM.replace("nn.LSTM(8, 16, batch_first=True)",
                         "nn.LSTM(8, 16, batch_first=True, dropout=0.0, bias=False)")
    assert not sig.same_bug(first_error(tmp_path, "c.py", wider))


def test_a_functional_check_names_the_functional_and_an_error_of_the_users_own_names_none(tmp_path):
    sig = first_error(tmp_path, "f.py",
                      "import torch\nimport torch.nn.functional as F\nF.interpolate(torch.randn(1, 3, 4, 4))\n")
    assert sig.headline == "ValueError: either size or scale_factor should be defined"
    assert sig.op is not None and sig.op.name == "torch.nn.functional.interpolate"
    assert [t.shape for t in sig.op.tensors] == [(1, 3, 4, 4)]
    own = first_error(tmp_path, "u.py", "import torch\nx = torch.ones(2)\nraise ValueError('bad x')\n")
    assert own.op is None


def test_the_module_whose_check_raised_is_extracted_built_as_it_was_and_called_on_its_inputs(tmp_path):
    from shrinkgpu.reducer import extract_call

    script = tmp_path / "lstm.py"
    script.write_text(LSTM)
    _, extraction = extract_call(ReduceConfig(script=script, keep_error="Expected hidden"))
    assert extraction.path == tmp_path / "lstm.extracted.py"
    assert extraction.text == textwrap.dedent("""\
        import torch

        x0 = torch.randn(4, 5, 8)
        x1_0 = torch.randn(2, 4, 16)
        x1_1 = torch.randn(2, 4, 16)
        torch.nn.LSTM(8, 16, batch_first=True)(x0, (x1_0, x1_1))
        """)
    # checked in a fresh interpreter: the same module, the same bug
    assert extraction.signature.op.name == "torch.nn.LSTM"
    assert extraction.signature.headline == "RuntimeError: Expected hidden[0] size (1, 4, 16), got [2, 4, 16]"


BATCHNORM = """\
import torch
import torch.nn as nn

norm = nn.BatchNorm1d(6)
x = torch.randn(1, 6)
out = norm(x)
"""
PACKED = """\
import torch
from torch.nn.utils.rnn import pack_padded_sequence

x = torch.randn(3, 5, 4)
lengths = torch.tensor([2, 5, 3])
packed = pack_padded_sequence(x, lengths, batch_first=True)
"""


@pytest.mark.parametrize("text, keep, suspect, line, again", [
    (BATCHNORM, "Expected more than 1 value per channel", "torch.nn.functional.batch_norm", "out = norm(x)",
     "y = norm(x) + 1"),
    (PACKED, "must be sorted in decreasing order", "torch._pack_padded_sequence",
     "packed = pack_padded_sequence(x, lengths, batch_first=True)",
     "p = pack_padded_sequence(x, lengths, True)"),
], ids=["batchnorm-one-value", "pack-padded-unsorted"])
def test_a_check_of_batchnorm_and_of_pack_padded_sequence_names_its_suspect_and_is_extracted(
        tmp_path, text, keep, suspect, line, again):
    from shrinkgpu.reducer import extract_call

    sig = first_error(tmp_path, "a.py", text)
    assert keep in sig.message and sig.op is not None and sig.op.name == suspect
    # kept by the strict signature: the failing line rewritten is the same bug
    assert sig.same_bug(first_error(tmp_path, "b.py", text.replace(line, again)))
    script = tmp_path / "case.py"
    script.write_text(text)
    _, extraction = extract_call(ReduceConfig(script=script, keep_error=keep))
    assert extraction.path == tmp_path / "case.extracted.py"
    assert extraction.signature.op.name == suspect and keep in extraction.signature.message
    # the same bug by the strict rule: the operator's dtype, shape, stride and device too
    assert sig.same_bug(extraction.signature), (sig.describe(), extraction.signature.describe())
    assert extraction.lines <= 8, extraction.text  # extract.MAX_LINES: read at a glance


LOAD = """\
import torch
import torch.nn as nn

saved = nn.Sequential(nn.Embedding(12, 4), nn.Linear(4, 2)).state_dict()
model = nn.Sequential(nn.Embedding(15, 4), nn.Linear(4, 2))
model.load_state_dict(saved)
"""


def test_a_state_dict_of_another_size_is_the_same_bug_only_into_a_model_of_the_same_size(tmp_path):
    sig = first_error(tmp_path, "a.py", LOAD)
    assert sig.op is not None and sig.op.name.endswith("Module.load_state_dict")
    # the message's first line ends with a colon: the headline goes on to what it announces
    assert sig.headline == ("RuntimeError: Error(s) in loading state_dict for Sequential: size mismatch for "
                            "0.weight: copying a param with shape torch.Size([12, 4]) from checkpoint, the shape "
                            "in current model is torch.Size([15, 4]).")
    # both halves of the mismatch: the checkpoint's tensor and the model's
    shapes = {t.path: t.shape for t in sig.op.tensors}
    assert shapes["kwargs['state_dict']['0.weight']"] == (12, 4) and shapes["self['0.weight']"] == (15, 4)
    assert sig.same_bug(first_error(tmp_path, "b.py", LOAD.replace("model.load_state_dict(saved)",
                                                                    "result = model.load_state_dict(saved)")))
    # a model of another size fails with the same words, but it is not the model that failed
    assert not sig.same_bug(first_error(tmp_path, "c.py", LOAD.replace("nn.Embedding(15, 4)", "nn.Embedding(1, 4)")))


WORKER = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Logs(Dataset):
    def __init__(self, lines):
        self.lines = lines

    def __len__(self):
        return len(self.lines)

    def parse(self, line):
        name, readings = line.split(",")
        return [float(v) for v in readings.split("|")]  # the readings

    def __getitem__(self, i):
        return torch.tensor(self.parse(self.lines[i]))


lines = ["a,1|2", "b,3|4", "c,5|", "d,7|8"]
for batch in DataLoader(Logs(lines), batch_size=2, num_workers=1):
    pass
"""


def test_an_error_in_a_dataloader_worker_is_the_expression_that_raised_not_the_frames_quoted(tmp_path):
    sig = first_error(tmp_path, "a.py", WORKER)
    assert sig.message.startswith("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback")
    assert sig.normalized == ("Caught ValueError in DataLoader worker process <n>.\n"
                              "<traceback raised at: float(v)>\n"
                              "ValueError: could not convert string to float: ''")
    # ``parse`` inlined, a comment gone, the lines moved: the frames the worker quotes
    # change, the bug does not
    inlined = WORKER.replace("        return torch.tensor(self.parse(self.lines[i]))",
                             "        name, readings = self.lines[i].split(',')\n"
                             "        return torch.tensor([float(v) for v in readings.split(\"|\")])")
    assert sig.same_bug(first_error(tmp_path, "b.py", inlined))
    # the same words raised by another expression are another bug
    other = WORKER.replace("return torch.tensor(self.parse(self.lines[i]))",
                           "return torch.tensor(float(self.lines[i].split('|')[-1]))")
    assert not sig.same_bug(first_error(tmp_path, "c.py", other))
