"""Changes of the extracted call (ablation/call.py): their exact edits for small calls,
then real runs of each in its own (forked) process, and the kind their outcomes show."""

from __future__ import annotations

import pytest

from shrinkgpu.ablation import CALL, DATA, LAYOUT, PRECISION, SIZE, call_changes, kind_of, with_edit

from .helpers import run_changes


def _meta(dtype, shape, stride=None, device="cpu", **more):
    if stride is None:
        stride, step = [], 1
        for size in reversed(shape):
            stride.insert(0, step)
            step *= max(size, 1)
    return {"dtype": dtype, "shape": list(shape), "stride": list(stride), "offset": 0, "device": device, **more}


CROSS_ENTROPY = ("import torch\n\nx0 = torch.randn(8, 4)\n"
                 "x1 = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2], dtype=torch.int64)\n"
                 "torch.nn.functional.cross_entropy(x0, x1)\n")
CE_ARGS = (("args[0]", "x0", _meta("float32", [8, 4])),
           ("args[1]", "x1", _meta("int64", [8], values=[0, 1, 2, 3, 4, 0, 1, 2])))
VIEW = ("import torch\n\nbase0 = torch.randn(24)\nx0 = base0.as_strided((2, 3, 4), (12, 1, 3), 0)\nx0.view(2, 12)\n")
VIEW_ARGS = (("args[0]", "x0", _meta("float32", [2, 3, 4], [12, 1, 3])),)
LINEAR = ("import torch\n\nx0 = torch.randn(4, 3, dtype=torch.float64)\nx1 = torch.randn(5, 3)\nx2 = torch.randn(5)\n"
          "torch._C._nn.linear(x0, x1, x2)\n")
LINEAR_ARGS = (("args[0]", "x0", _meta("float64", [4, 3])), ("args[1]", "x1", _meta("float32", [5, 3])),
               ("args[2]", "x2", _meta("float32", [5])))


def _edits(changes):
    return {c.name: (c.category, c.edit) for c in changes}


def test_a_class_target_out_of_range_is_clamped_to_the_classes_and_the_batch_cut():
    changes = call_changes(CROSS_ENTROPY, "torch.nn.functional.cross_entropy", CE_ARGS, script="c.py")
    assert _edits(changes) == {
        "valid values": (DATA, "+ x1 = x1.clamp(0, 3)"),
        "ignored targets": (DATA, "+ x1 = x1.masked_fill((x1 < 0) | (x1 >= 4), -100)"),
        "batch 1": (SIZE, "+ x0 = x0[:1]\n+ x1 = x1[:1]"),
    }
    assert all(c.subject == CALL for c in changes)
    # the whole text: the edit just before the call, and the call's result printed
    text = changes[0].files["c.py"]
    assert text.startswith(CROSS_ENTROPY.rsplit("\n", 2)[0] + "\nx1 = x1.clamp(0, 3)\n"
                           "out = torch.nn.functional.cross_entropy(x0, x1)\n")
    assert "print('shrinkgpu-output: ' + _shrinkgpu_summary(out))" in text
    # values already in range: no data change (and a batch of 6 also tries 4, a power of two)
    valid = (CE_ARGS[0], ("args[1]", "x1", _meta("int64", [6], values=[0, 1, 2, 3, 0, 1])))
    assert not {"valid values", "ignored targets"} & set(
        _edits(call_changes(CROSS_ENTROPY, "torch.nn.functional.cross_entropy", valid)))
    six = (("args[0]", "x0", _meta("float32", [6, 4])), valid[1])
    assert _edits(call_changes(CROSS_ENTROPY, "torch.nn.functional.cross_entropy", six))["batch 4"] == (
        SIZE, "+ x0 = x0[:4]\n+ x1 = x1[:4]")


def test_ignored_targets_take_the_ignore_index_the_call_names():
    text = CROSS_ENTROPY.replace("cross_entropy(x0, x1)", "cross_entropy(x0, x1, ignore_index=7)")
    edits = _edits(call_changes(text, "torch.nn.functional.cross_entropy", CE_ARGS))
    assert edits["ignored targets"] == (DATA, "+ x1 = x1.masked_fill((x1 < 0) | (x1 >= 4), 7)")
    # only a loss's class targets: an embedding's indices have no value it skips
    emb = (("args[0]", "x0", _meta("int64", [3], values=[0, 9, 1])), ("args[1]", "x1", _meta("float32", [5, 2])))
    assert "ignored targets" not in _edits(call_changes(
        "import torch\n\nx0 = torch.tensor([0, 9, 1])\nx1 = torch.randn(5, 2)\n"
        "torch.nn.functional.embedding(x0, x1)\n",
        "torch.nn.functional.embedding", emb))


def test_indices_of_an_unknown_operator_are_clamped_below_the_smallest_dimension_and_nan_replaced():
    args = (("args[0]", "x0", _meta("float32", [10, 6], nonfinite=True)), ("args[1]", "x1", _meta("int64", [3])))
    edits = _edits(call_changes("import torch\n\nx0 = data['args[0]']\nx1 = data['args[1]']\ntorch.take(x0, x1)\n",
                                "torch.take", args))
    assert edits["valid values"] == (DATA, "+ x1 = x1.clamp(0, 5)\n+ x0 = torch.nan_to_num(x0)")


def test_a_view_of_a_transpose_gets_contiguous_inputs_and_the_reshape_its_error_suggests():
    edits = _edits(call_changes(VIEW, "Tensor.view", VIEW_ARGS))
    assert edits == {
        "contiguous inputs": (LAYOUT, "+ x0 = x0.contiguous()"),
        "reshape for view": (LAYOUT, "- x0.view(2, 12)\n+ x0.reshape(2, 12)"),
        "batch 1": (SIZE, "+ x0 = x0[:1]"),
    }


def test_mixed_dtypes_get_one_dtype_and_float32_and_a_gpu_call_the_cpu():
    edits = _edits(call_changes(LINEAR, "torch._C._nn.linear", LINEAR_ARGS))
    assert edits["one dtype (float64)"] == (PRECISION, "+ x1 = x1.to(torch.float64)\n+ x2 = x2.to(torch.float64)")
    assert edits["float32"] == (PRECISION, "+ x0 = x0.float()")
    on_gpu = tuple((w, n, {**m, "device": "cuda:0"}) for w, n, m in LINEAR_ARGS)
    assert _edits(call_changes(LINEAR, "torch._C._nn.linear", on_gpu))["on the CPU"][1] == (
        "+ x0 = x0.cpu()\n+ x1 = x1.cpu()\n+ x2 = x2.cpu()")
    assert "on a GPU" in _edits(call_changes(LINEAR, "torch._C._nn.linear", LINEAR_ARGS, gpu_visible=True))
    assert "on a GPU" not in _edits(call_changes(LINEAR, "torch._C._nn.linear", LINEAR_ARGS))


def test_a_sparse_argument_gets_no_batch_cut():
    sparse = (("args[0]", "x0", {**_meta("float32", [6, 6]), "stride": None}),
              ("args[1]", "x1", _meta("float32", [5, 3])))
    edits = _edits(call_changes("import torch\n\nx0 = data['args[0]']\nx1 = torch.randn(5, 3)\n"
                                "torch._C._sparse._sparse_mm(x0, x1)\n", "torch._C._sparse._sparse_mm", sparse))
    assert not any(name.startswith("batch") for name in edits), edits
    assert "contiguous inputs" not in edits


def test_with_edit_loads_the_tensors_from_the_path_given():
    text = "import torch\n\ndata = torch.load('t.extracted.pt')\nx0 = data['args[0]']\nx0.sum()\n"
    assert with_edit(text, ["x0 = x0.float()"], data="/abs/t.extracted.pt", summary=False) == (
        "import torch\n\ndata = torch.load('/abs/t.extracted.pt')\nx0 = data['args[0]']\nx0 = x0.float()\nx0.sum()\n")


@pytest.mark.slow
@pytest.mark.parametrize("text, op, arguments, kind, passing", [
    (CROSS_ENTROPY, "torch.nn.functional.cross_entropy", CE_ARGS, "invalid data",
     {"valid values", "ignored targets", "batch 1"}),
    (VIEW, "Tensor.view", VIEW_ARGS, "operator contract", {"contiguous inputs", "reshape for view"}),
    (LINEAR, "torch._C._nn.linear", LINEAR_ARGS, "operator contract", {"one dtype (float64)", "float32"}),
], ids=["class-index", "view-after-transpose", "double-meets-float"])
def test_each_change_runs_in_its_own_process_and_the_outcomes_decide_the_kind(
        tmp_path, text, op, arguments, kind, passing):
    _sig, found = run_changes(tmp_path, "call.py", text, lambda: call_changes(text, op, arguments, script="call.py"))
    assert {o.change for o in found if o.result == "passes"} == passing, found
    assert all(o.output and o.output.endswith("all finite") and "not" not in o.output
               for o in found if o.result == "passes")
    assert kind_of(found, on_gpu=False).kind == kind
