"""The bug's kind from the outcomes (ablation/kinds.py): each rule, and what it refuses
to claim."""

from __future__ import annotations

from shrinkgpu.ablation import (
    BACKEND,
    CALL,
    CASE,
    CONTRACT,
    DATA,
    DEVICE,
    DIFFERENT,
    ENVIRONMENT,
    INVALID_DATA,
    LAYOUT,
    PASSES,
    PRECISION,
    SAME,
    SIZE,
    UNDECIDED,
    Outcome,
    kind_of,
)


def o(change, result, category, subject=CALL, edit="", output=None, error=None):
    return Outcome(change, "", result, error, category, subject, edit, output)


def test_valid_values_that_pass_are_invalid_data_and_a_nan_result_is_said():
    found = [o("valid values", PASSES, DATA, edit="+ x1 = x1.clamp(0, 3)", output="float32[] all finite"),
             o("batch 1", PASSES, SIZE)]
    kind = kind_of(found, on_gpu=False)
    assert kind.kind == INVALID_DATA and "`x1 = x1.clamp(0, 3)`" in kind.reason
    nan = kind_of([o("valid values", PASSES, DATA, output="float32[] not all finite")], on_gpu=False)
    assert "not all finite" in nan.reason


def test_mixed_dtypes_and_strides_are_the_contract_one_low_precision_dtype_the_environment():
    assert kind_of([o("one dtype (float64)", PASSES, PRECISION), o("float32", PASSES, PRECISION)],
                   on_gpu=False).kind == CONTRACT
    assert kind_of([o("float32", PASSES, PRECISION)], on_gpu=False).kind == ENVIRONMENT
    assert kind_of([o("contiguous inputs", PASSES, LAYOUT)], on_gpu=False).kind == CONTRACT
    assert kind_of([o("cuDNN off", PASSES, BACKEND, CASE)], on_gpu=True).kind == ENVIRONMENT


def test_nothing_passing_is_the_contract_only_when_valid_values_and_the_cpu_were_seen_failing():
    same = [o("valid values", SAME, DATA), o("batch 1", SAME, SIZE)]
    assert kind_of(same, on_gpu=False).kind == CONTRACT
    assert "on the CPU (no GPU to compare)" in kind_of(same, on_gpu=False).reason
    # on a GPU without the CPU compared, or with the CPU failing otherwise: not decided
    assert kind_of(same, on_gpu=True).kind == UNDECIDED
    assert kind_of(same + [o("on the CPU", DIFFERENT, DEVICE)], on_gpu=True).kind == UNDECIDED
    both = kind_of(same + [o("on the CPU", SAME, DEVICE)], on_gpu=True)
    assert both.kind == CONTRACT and "the CPU and the GPU alike" in both.reason
    # valid values failing otherwise, or no extracted call at all: not decided
    assert kind_of([o("valid values", DIFFERENT, DATA, error="ValueError: x")], on_gpu=False).kind == UNDECIDED
    assert kind_of([o("cuDNN off", SAME, BACKEND, CASE)], on_gpu=True).kind == UNDECIDED


def test_the_device_alone_or_the_size_alone_decides_nothing():
    cpu = kind_of([o("valid values", SAME, DATA), o("on the CPU", PASSES, DEVICE, CASE)], on_gpu=True)
    assert cpu.kind == UNDECIDED and "not evidence" in cpu.hint
    assert kind_of([o("batch 1", PASSES, SIZE)], on_gpu=False).kind == UNDECIDED


def test_a_compiled_case_is_read_from_its_backends():
    def compiled(**results):
        return kind_of([o(name, value, BACKEND, CASE) for name, value in results.items()], on_gpu=False,
                       compiled=True)

    off = "torch.compile off"
    assert compiled(**{off: PASSES, "fullgraph=False": PASSES, 'backend="eager"': SAME}).kind == CONTRACT
    assert compiled(**{off: PASSES, 'backend="eager"': PASSES, 'backend="aot_eager"': SAME}).kind == ENVIRONMENT
    assert compiled(**{off: PASSES, 'backend="eager"': SAME, 'backend="aot_eager"': SAME}).kind == UNDECIDED
    # a reduced case that no longer runs eagerly decides nothing, and says why
    broken = kind_of([o(off, DIFFERENT, BACKEND, CASE, error="RuntimeError: Boolean value of Tensor"),
                      o('backend="eager"', SAME, BACKEND, CASE)], on_gpu=False, compiled=True)
    assert broken.kind == UNDECIDED and "Boolean value of Tensor" in broken.reason


def test_a_whole_case_that_passes_with_a_nan_result_says_so():
    from shrinkgpu.ablation import EXTENSION

    nan = kind_of([o("fastops disabled", PASSES, EXTENSION, CASE, output="float32[4] not all finite")], on_gpu=False)
    assert nan.kind == ENVIRONMENT and "float32[4] not all finite" in nan.reason
    cudnn = kind_of([o("cuDNN off", PASSES, BACKEND, CASE, output="float16[2, 3] not all finite")], on_gpu=True)
    assert cudnn.kind == ENVIRONMENT and "not all finite" in cudnn.reason
    fine = kind_of([o("cuDNN off", PASSES, BACKEND, CASE, output="float16[2, 3] all finite")], on_gpu=True)
    assert "finite" not in fine.reason
