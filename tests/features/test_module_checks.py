"""A module's own check of its inputs, wherever the user's code calls the module (issue
48, item 2): as an attribute of the user's module, in a stage of a ``Sequential``,
through a forward hook.  The extracted call is the module built as it was built, called
on the inputs it was given; the result keeps the same bug.  End to end: real workers,
real torch on the CPU, small budgets (the extraction comes before the search)."""

from __future__ import annotations

import os
import textwrap

import pytest

from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.signature import Target

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("short_scripts_stay_short")]

GRU_ATTRIBUTE = """\
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 8)
        self.rnn = nn.GRU(8, 16, num_layers=2, batch_first=True)

    def forward(self, x, h):
        out, _ = self.rnn(self.proj(x), h)
        return out


torch.manual_seed(0)
model = Tagger()
data = torch.randn(10, 5, 3)
h0 = torch.zeros(2, 4, 16)  # for the configured batch of 4: the last batch holds 2
for start in range(0, 10, 4):
    model(data[start:start + 4], h0)
"""

PACKED_STAGE = """\
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence


class Pack(nn.Module):
    def forward(self, inputs):
        x, lengths = inputs
        return pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)


class Speaker(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.Sequential(Pack())

    def forward(self, x, lengths):
        return self.stages((x, lengths))


frames = torch.randn(3, 6, 4)
lengths = torch.tensor([6, 0, 2])  # an all-silent utterance trimmed to nothing
Speaker()(frames, lengths)
"""

MHA_HOOK = """\
import torch
import torch.nn as nn


class Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.slots = torch.randn(2, 7, 16)

    def read(self, module, inputs, output):
        return self.attn(output, self.slots, self.slots[:, :5])[0]


memory = Memory()
body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
body.register_forward_hook(memory.read)
body(torch.randn(2, 3, 8))
"""


@pytest.mark.parametrize("text, keep, expected, suspect", [
    (GRU_ATTRIBUTE, r"Expected hidden size", """\
        import torch

        x0 = torch.randn(2, 5, 8).requires_grad_()
        x1 = torch.randn(2, 4, 16)
        torch.nn.GRU(8, 16, num_layers=2, batch_first=True)(x0, x1)
        """, "torch.nn.GRU"),
    (PACKED_STAGE, r"Length of all samples has to be greater than 0", """\
        import torch

        x0 = torch.randn(3, 6, 4)
        x1 = torch.tensor([6, 2, 0], dtype=torch.int64)
        torch._pack_padded_sequence(x0, x1, True)
        """, "torch._pack_padded_sequence"),
    (MHA_HOOK, r"key shape .* does not match value shape", """\
        import torch

        x0 = torch.randn(2, 3, 16).requires_grad_()
        base0 = torch.randn(224)
        x1 = base0.as_strided((2, 7, 16), (112, 16, 1), 0)
        x2 = base0.as_strided((2, 5, 16), (112, 16, 1), 0)
        torch.nn.MultiheadAttention(16, 4, batch_first=True)(x0, x1, x2)
        """, "torch.nn.functional.multi_head_attention_forward"),
], ids=["gru-attribute-hidden-size", "pack-padded-in-a-sequential-stage", "multihead-attention-in-a-hook"])
def test_a_module_check_inside_the_users_module_is_extracted_as_the_module_called_on_its_inputs(
        tmp_path, text, keep, expected, suspect):
    result = reduce_and_check(tmp_path, text, keep)
    extracted = result.extracted
    assert extracted is not None, result.extract_error
    assert extracted.text == textwrap.dedent(expected)
    assert extracted.data is None  # nothing beside it: it runs alone
    # checked in a fresh interpreter: the same suspect, the same bug by the strict rule
    assert extracted.signature.op.name == suspect == result.signature.op.name
    assert Target(result.signature).matches(extracted.signature)


def reduce_and_check(tmp_path, text: str, keep: str):
    result = reduce(ReduceConfig(script=_script(tmp_path, text), keep_error=keep,
                                 output=tmp_path / "out" / "train.min.py", verify_runs=1, confirm=0, max_tests=25,
                                 jobs=1, ablate=False, env={**os.environ}))
    # the result keeps the same bug in its fresh run, and it runs alone too
    assert result.verified == (1, 1)
    assert Target(result.signature).matches(result.final_signature)
    assert result.alone is not None and result.alone["artifact"] == "result" and result.alone["checked"]
    return result


def _script(tmp_path, text: str):
    script = tmp_path / "job" / "train.py"
    script.parent.mkdir()
    script.write_text(text)
    return script
