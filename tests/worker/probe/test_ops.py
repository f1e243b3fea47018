"""probe/ops.py with real processes: the torch call that raised, as the user wrote it,
with its tensors' metadata, the shapes it had across the run and its arguments as it
raised.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from shrinkgpu.signature import Frame, TensorMeta
from worker.helpers import HEADER, run


@pytest.mark.parametrize(
    "call, kind, message, op, tensors",
    [
        (
            "torch.randn(4, 6).t().view(24)",
            "RuntimeError",
            "view size is not compatible with input tensor's size and stride",
            "Tensor.view",
            (TensorMeta("args[0]", "float32", (6, 4), (1, 6), "cpu"),),
        ),
        (
            "torch.gather(torch.randn(2, 3), 1, torch.tensor([[5], [0]]))",
            "RuntimeError",
            "index 5 is out of bounds for dimension 1 with size 3",
            "torch.gather",
            (
                TensorMeta("args[0]", "float32", (2, 3), (3, 1), "cpu"),
                TensorMeta("args[2]", "int64", (2, 1), (1, 1), "cpu"),
            ),
        ),
        (
            "torch.nn.Linear(5, 3)(torch.randn(2, 4))",
            "RuntimeError",
            "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)",
            "torch._C._nn.linear",
            (
                TensorMeta("args[0]", "float32", (2, 4), (4, 1), "cpu"),
                TensorMeta("args[1]", "float32", (3, 5), (5, 1), "cpu"),
                TensorMeta("args[2]", "float32", (3,), (1,), "cpu"),
            ),
        ),
        (
            "torch.nn.Embedding(3, 2)(torch.tensor([3]))",
            "IndexError",
            "index out of range in self",
            "torch.nn.functional.embedding",
            (
                TensorMeta("args[0]", "int64", (1,), (1,), "cpu"),
                TensorMeta("args[1]", "float32", (3, 2), (2, 1), "cpu"),
            ),
        ),
    ],
    ids=["view", "gather", "linear", "embedding"],
)
def test_suspect_operator_is_the_python_api_call_with_its_real_tensor_metadata(
    fork_runner, call, kind, message, op, tensors
):
    obs = run(fork_runner, HEADER + call + "\n")
    sig = obs.signature
    assert sig.type == kind
    # as torch says it: torch 2.15 puts the operator's name first ("addmm: mat1 and mat2
    # shapes cannot be multiplied"), 2.13 and 2.14 do not; the probe keeps either verbatim
    assert re.match(r"(?:\w+: )?" + re.escape(message), sig.message), sig.message
    assert sig.op.name == op
    assert sig.op.tensors == tensors
    assert sig.frame == Frame("s.py", 4, "<module>", call)


def test_the_shapes_an_operator_had_across_the_run_are_recorded_for_the_one_that_raised(fork_runner):
    text = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        table = torch.randn(4, 3)  # rows 0..3; the loop appends a 4 at step 4
        context = torch.tensor([[0]])
        for step in range(6):
            F.relu(table)
            F.embedding(context, table)
            context = torch.cat([context, torch.tensor([[step]])], dim=1)
        """)
    obs = run(fork_runner, text, op_shapes=True)
    assert obs.signature.op.name == "torch.nn.functional.embedding"
    assert obs.signature.op.tensors[0].shape == (1, 6)
    # the calls that returned; the one that raised (length 6) is no evidence of its own
    assert obs.op_shapes == {"torch.nn.functional.embedding": {
        "args[0]": tuple((1, n) for n in range(1, 6)), "args[1]": ((4, 3),)}}
    assert run(fork_runner, text).op_shapes == {}  # only when asked


def test_the_shapes_of_another_layers_calls_of_the_operator_are_not_the_failing_ones(fork_runner):
    # Two layers call F.linear with inputs 32 and 16 wide; under a transform that drops
    # the batch, the first layer gets 8 features.  The width varied across F.linear's
    # calls, but only because the layers differ: the first layer always had 32.
    text = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        net = nn.Sequential(nn.Linear(32, 16), nn.Linear(16, 4))
        for n in (64, 64, 40):
            net(torch.randn(n, 32))
        net(torch.randn(64, 4, 8).flatten(0, 1))
        """)
    obs = run(fork_runner, text, op_shapes=True)
    assert obs.signature.op.name == "torch._C._nn.linear"
    assert obs.signature.op.tensors[0].shape == (256, 8)
    assert obs.op_shapes == {"torch._C._nn.linear": {
        "args[0]": ((40, 32), (64, 32)), "args[1]": ((16, 32),), "args[2]": ((16,),)}}
    from shrinkgpu.signature import varying_dims
    assert varying_dims(obs.signature.op, obs.op_shapes["torch._C._nn.linear"]) == {("args[0]", 0)}


def test_the_arguments_of_a_call_that_raised_are_kept_as_it_raised(fork_runner, tmp_path):
    from shrinkgpu.extract import raised_record

    text = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        try:
            torch.zeros(2).view(3)  # caught: user code tries a fast path first
        except RuntimeError:
            pass
        logits = torch.randn(3, 4)
        F.cross_entropy(logits, torch.tensor([0, 4, 1]))
        """)
    obs = run(fork_runner, text, keep_raised=str(tmp_path / "raised"))
    assert [(r["op"], r["call"]) for r in obs.raised_calls] == [
        ("Tensor.view", 1), ("torch.nn.functional.cross_entropy", 1)]
    record = raised_record(obs.raised_calls, obs.signature)
    assert record["op"] == "torch.nn.functional.cross_entropy"
    assert record["meta"]["args[1]"]["values"] == [0, 4, 1]
    assert run(fork_runner, text).raised_calls == ()  # only when asked


def test_whether_a_floating_point_tensor_at_the_failing_call_was_finite_is_recorded(fork_runner):
    text = textwrap.dedent("""\
        import torch
        probs = torch.full((2, 3), 0.5)
        probs[1, 1] = float("inf")
        torch.multinomial(probs, 1)
        """)
    meta = run(fork_runner, text).signature.op.tensors
    assert [(t.path, t.finite) for t in meta] == [("args[0]", False)]
    negative = run(fork_runner, text.replace('float("inf")', "-1.0")).signature
    assert [t.finite for t in negative.op.tensors] == [True]
