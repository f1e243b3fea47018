"""families.py: the device assertion a kernel printed, and the family of an error by its
class and words; pure, on the texts PyTorch really prints (tests/signatures.py)."""

from __future__ import annotations

import pytest

from shrinkgpu.signature import Family, classify_family, parse_kernel_assertion
from signatures import (
    DEVICE_ASSERT,
    DEVICE_ASSERT_HIP,
    DEVICE_ASSERT_NEW,
    INDEX_ASSERT,
    LOSS_ASSERT,
    LOSS_ASSERT_VALUE,
    cuda_assert_line,
    oom,
)

# ======================================================================================
# parse_kernel_assertion
# ======================================================================================


def test_parse_kernel_assertion_on_the_cuda_nll_loss_line():
    assert parse_kernel_assertion(LOSS_ASSERT) == LOSS_ASSERT_VALUE


def test_parse_kernel_assertion_ignores_block_thread_line_and_build_path():
    other = cuda_assert_line(
        "/opt/conda/conda-bld/pytorch_1695392067/work/aten/src/ATen/native/cuda/Loss.cu",
        248,
        "nll_loss_forward_reduce_cuda_kernel_2d",
        "12,0,0",
        "31,0,0",
        "t >= 0 && t < n_classes",
    )
    assert parse_kernel_assertion(other) == parse_kernel_assertion(LOSS_ASSERT) == LOSS_ASSERT_VALUE


def test_parse_kernel_assertion_takes_the_first_assertion_in_noisy_output():
    output = "\n".join(
        [
            "epoch 0 step 12 loss 1.3862",
            LOSS_ASSERT,
            LOSS_ASSERT.replace("thread: [5,0,0]", "thread: [6,0,0]"),
            INDEX_ASSERT,
            "Traceback (most recent call last):",
        ]
    )
    assert parse_kernel_assertion(output) == LOSS_ASSERT_VALUE


def test_parse_kernel_assertion_keeps_kernel_and_condition():
    assert parse_kernel_assertion(INDEX_ASSERT) == (
        'IndexKernel.cu: operator(): Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed'
    )
    assert parse_kernel_assertion(INDEX_ASSERT) != parse_kernel_assertion(LOSS_ASSERT)


def test_parse_kernel_assertion_distinguishes_conditions():
    other = LOSS_ASSERT.replace("t >= 0 && t < n_classes", "cur_target >= 0 && cur_target < n_classes")
    assert parse_kernel_assertion(other) != parse_kernel_assertion(LOSS_ASSERT)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "RuntimeError: CUDA error: device-side assert triggered",
        DEVICE_ASSERT,
        'Traceback (most recent call last):\n  File "train.py", line 3\nAssertionError: t >= 0',
        "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: Assertion `t >= 0` failed",
    ],
)
def test_parse_kernel_assertion_is_none_without_a_device_assertion(output):
    assert parse_kernel_assertion(output) is None


# HIP's device __assert_fail (hip/amd_detail/amd_device_functions.h) prints
#   "%s:%u: %s: Device-side assertion `%s' failed.\n"
# and PyTorch's CUDA_KERNEL_ASSERT calls __assert_fail on ROCm when built with
# C10_USE_ROCM_KERNEL_ASSERT (c10/macros/Macros.h); hipified sources end in .hip.
HIP_LOSS_ASSERT = (
    "/pytorch/aten/src/ATen/native/hip/Loss.hip:250: nll_loss_forward_reduce_cuda_kernel_2d: "
    "Device-side assertion `t >= 0 && t < n_classes' failed."
)


def test_parse_kernel_assertion_on_the_rocm_form():
    value = parse_kernel_assertion(HIP_LOSS_ASSERT)
    assert value is not None
    assert "t >= 0 && t < n_classes" in value
    assert "Loss.hip" in value and "250" not in value
    assert parse_kernel_assertion(HIP_LOSS_ASSERT.replace(":250:", ":251:")) == value


# ======================================================================================
# classify_family
# ======================================================================================


@pytest.mark.parametrize(
    "type_name, message, family",
    [
        ("torch.AcceleratorError", DEVICE_ASSERT, Family.DEVICE_ASSERT),
        ("RuntimeError", DEVICE_ASSERT_NEW, Family.DEVICE_ASSERT),
        ("RuntimeError", DEVICE_ASSERT_HIP, Family.DEVICE_ASSERT),
        ("torch.OutOfMemoryError", oom("2.00", "79.15", "1.21", "77.93"), Family.OUT_OF_MEMORY),
        ("RuntimeError", "CUDA error: out of memory", Family.OUT_OF_MEMORY),
        ("torch.OutOfMemoryError", "", Family.OUT_OF_MEMORY),
        ("RuntimeError", "CUDA error: no kernel image is available for execution on the device", Family.MISSING_KERNEL),
        (
            "NotImplementedError",
            "Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend. This could be "
            "because the operator doesn't exist for this backend, or was omitted during the "
            "selective/custom build process (if using custom build).",
            Family.MISSING_KERNEL,
        ),
        ("RuntimeError", "\"addmm_impl_cpu_\" not implemented for 'Half'", Family.MISSING_KERNEL),
        (
            "RuntimeError",
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
            "and cpu! (when checking argument for argument mat1 in method wrapper_CUDA_addmm)",
            Family.DEVICE_MISMATCH,
        ),
        ("IndexError", "Target 4 is out of bounds.", Family.INDEX),
        ("IndexError", "index out of range in self", Family.INDEX),
        ("RuntimeError", "index 5 is out of bounds for dimension 1 with size 3", Family.INDEX),
        ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)", Family.SHAPE),
        (
            "RuntimeError",
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead.",
            Family.VIEW,
        ),
        (
            "RuntimeError",
            "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
            Family.SHAPE,
        ),
        ("RuntimeError", "shape '[2, -1]' is invalid for input of size 7", Family.SHAPE),
        ("RuntimeError", "mat1 and mat2 must have the same dtype, but got Double and Float", Family.DTYPE),
        ("RuntimeError", "expected scalar type Long but found Float", Family.DTYPE),
        ("RuntimeError", "Found dtype Long but expected Float", Family.DTYPE),
        ("signal.SIGSEGV", "killed by signal 11 (SIGSEGV)", Family.CRASH),
        # the signal decides, whatever the text says
        ("signal.SIGKILL", "out of memory", Family.CRASH),
        ("KeyError", "'model_state_dict'", Family.OTHER),
        ("FileNotFoundError", "[Errno 2] No such file or directory: 'ckpt.pt'", Family.OTHER),
        ("ValueError", "invalid literal for int() with base 10: 'abc'", Family.OTHER),
    ],
)
def test_classify_family(type_name, message, family):
    assert classify_family(type_name, message) is family


def test_classify_family_device_assert_wins_over_words_of_other_families():
    message = DEVICE_ASSERT + LOSS_ASSERT + " index out of bounds, shape, dtype"
    assert classify_family("RuntimeError", message) is Family.DEVICE_ASSERT


@pytest.mark.parametrize(
    "type_name, message, family",
    [
        (
            "RuntimeError",
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same "
            "or input should be a MKLDNN tensor and weight is a dense tensor",
            Family.DEVICE_MISMATCH,
        ),
        ("ValueError", "Expected input batch_size (4) to match target batch_size (3).", Family.SHAPE),
        (
            "RuntimeError",
            "Given groups=1, weight of size [16, 3, 3, 3], expected input[1, 1, 28, 28] to have 3 "
            "channels, but got 1 channels instead",
            Family.SHAPE,
        ),
        # torch.distributions' validation names the parameter's shape; it rejects values
        (
            "ValueError",
            "Expected parameter scale (Tensor of shape (128, 3)) of distribution Normal(loc: torch.Size([128, 3]), "
            "scale: torch.Size([128, 3])) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid "
            "values:\ntensor([[-0.0100, 0.2000, 0.3000]])",
            Family.OTHER,
        ),
        (
            "ValueError",
            "Expected value argument (Tensor of shape (4,)) to be within the support (IntegerInterval(lower_bound=0, "
            "upper_bound=2)) of the distribution Categorical(logits: torch.Size([4, 3])), but found invalid values:\n"
            "tensor([0, 1, 3, 2])",
            Family.OTHER,
        ),
    ],
)
def test_classify_family_of_common_wordings_missed_by_the_rules(type_name, message, family):
    assert classify_family(type_name, message) is family
