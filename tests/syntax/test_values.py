"""Source text for recorded values (syntax/values.py): tensors as literals or of their
layout, the structures around them, and a loaded call written back as source."""

from __future__ import annotations

import textwrap

from shrinkgpu.syntax.values import EXACT, LAYOUT, tensor_source, value_source, write_back

CONTIGUOUS = {"dtype": "float32", "shape": [2, 2], "stride": [2, 1], "offset": 0, "device": "cpu"}


def test_a_small_tensor_is_its_literal_at_both_levels_and_a_large_float_one_only_its_layout():
    ids = {**CONTIGUOUS, "dtype": "int64", "shape": [3], "stride": [1], "values": [1, 9, 3]}
    assert tensor_source(ids, EXACT) == tensor_source(ids, LAYOUT) == "torch.tensor([1, 9, 3], dtype=torch.int64)"
    small = {**CONTIGUOUS, "values": [[0.5, float("nan")], [1.0, float("-inf")]], "nonfinite": True}
    literal = "torch.tensor([[0.5, float('nan')], [1.0, float('-inf')]])"
    # a NaN is the bug's own value: kept at the layout level too
    assert tensor_source(small, EXACT) == tensor_source(small, LAYOUT) == literal
    finite = {**CONTIGUOUS, "values": [[0.5, 1.5], [2.0, 3.0]], "requires_grad": True}
    assert tensor_source(finite, EXACT) == "torch.tensor([[0.5, 1.5], [2.0, 3.0]]).requires_grad_()"
    assert tensor_source(finite, LAYOUT) == "torch.randn(2, 2).requires_grad_()"
    large = {**CONTIGUOUS, "dtype": "bfloat16", "shape": [128, 4], "stride": [4, 1], "device": "cuda:0"}
    assert tensor_source(large, EXACT) is None  # its values were not recorded: no exact text
    assert tensor_source(large, LAYOUT, torch="T") == "T.randn(128, 4, dtype=T.bfloat16).to('cuda:0')"
    labels = {**large, "dtype": "int64", "device": "cpu"}
    assert tensor_source(labels, LAYOUT) == "torch.zeros(128, 4, dtype=torch.int64)"
    view = {**CONTIGUOUS, "shape": [4, 3], "stride": [1, 4]}
    assert tensor_source(view, LAYOUT) == "torch.randn(12).as_strided((4, 3), (1, 4), 0)"
    assert tensor_source({**view, "values": [[0.0] * 3] * 4}, EXACT) is None  # a literal is contiguous


def test_a_structure_is_written_when_every_part_has_a_source_at_its_level():
    meta = {"args[0][0]": {**CONTIGUOUS, "shape": [2], "stride": [1], "values": [1.0, 2.0]}}

    def tensor(where):
        return tensor_source(meta[where], EXACT)

    node = {"seq": [{"t": "args[0][0]"}, {"lit": "3"}, {"map": {"lr": {"lit": "0.1"}}}], "tuple": True}
    assert value_source(node, tensor) == "(torch.tensor([1.0, 2.0]), 3, {'lr': 0.1})"
    assert value_source({"seq": [{"t": "args[0][0]"}], "tuple": True}, tensor) == "(torch.tensor([1.0, 2.0]),)"
    built = {"module": "torch.nn.Linear(4, 2)"}
    # a module built anew has other weights: only where the values were given up
    assert value_source(built, tensor, EXACT) is None and value_source(built, tensor, LAYOUT) == "torch.nn.Linear(4, 2)"
    assert value_source({"seq": [{"lit": "1"}, {"unknown": "Trainer"}]}, tensor) is None


def test_a_loaded_call_is_written_back_as_source_however_the_passes_left_its_load():
    inlined = textwrap.dedent("""\
        import pathlib
        import torch


        def f(ids, mask):
            return ids[mask]


        torch.compile(f, fullgraph=True)(*torch.load(pathlib.Path(__file__).with_name('repro.call.pt'))['args'])
        """)
    assert write_back(inlined, "repro.call.pt", ["torch.tensor([1, 9])", "torch.tensor([True, False])"], [], []) == (
        inlined.replace("import pathlib\n", "").replace(
            "*torch.load(pathlib.Path(__file__).with_name('repro.call.pt'))['args']",
            "torch.tensor([1, 9]), torch.tensor([True, False])"))
    bound = textwrap.dedent("""\
        import pathlib
        import torch as T


        def main():
            model = Net()
            _call = T.load(pathlib.Path(__file__).with_name('train.call.pt'), weights_only=False)
            model.w = _call['attributes']['w']
            print(pathlib.Path('log'), _call['args'])
            model.training_step(*_call['args'], **_call['kwargs'])
        """)
    assert write_back(bound, "train.call.pt", ["T.randn(3, 4)"], [("batch_idx", "0")], [("w", "T.zeros(3)")]) == (
        textwrap.dedent("""\
            import pathlib
            import torch as T


            def main():
                model = Net()
                model.w = T.zeros(3)
                print(pathlib.Path('log'), [T.randn(3, 4)])
                model.training_step(T.randn(3, 4), batch_idx=0)
            """))
    # an attribute it has no text for: the file stays needed, nothing is written
    assert write_back(bound, "train.call.pt", ["T.randn(3, 4)"], [("batch_idx", "0")], []) is None
