"""Error texts as PyTorch really prints them, and builders of records and signatures:
what tests/test_signature.py, tests/test_families.py and tests/worker/test_observation.py
read.  The CPU messages were measured; the CUDA texts come from
c10/cuda/CUDAException.cpp, CUDAMiscFunctions.cpp, CUDADeviceAssertionHost.cpp and the
CUDA/HIP device ``__assert_fail`` formats.
"""

from __future__ import annotations

import dataclasses

from shrinkgpu.signature import ExceptionRecord, Frame, OpRecord, Signature, TensorMeta

# --------------------------------------------------------------------------------------
# Realistic texts
# --------------------------------------------------------------------------------------

DEVICE_ASSERT = (
    "CUDA error: device-side assert triggered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# torch >= 2.8 adds a "Search for `cudaErrorAssert' ..." line after the first one.
DEVICE_ASSERT_NEW = (
    "CUDA error: device-side assert triggered\n"
    "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
    "group__CUDART__TYPES.html for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# With CUDA_LAUNCH_BLOCKING=1 torch leaves out the asynchrony advice.
DEVICE_ASSERT_BLOCKING = (
    "CUDA error: device-side assert triggered\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
DEVICE_ASSERT_HIP = (
    "HIP error: device-side assert triggered\n"
    "For debugging consider passing HIP_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n"
)
# Older releases appended the C++ stack to the message.
ILLEGAL_ACCESS_WITH_CPP_STACK = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
    "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 "
    "(most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f2c5a16e617 in "
    "/usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)\n"
    "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
    "std::string const&) + 0x64 (0x7f2c5a12498d in "
    "/usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)\n"
)


def oom(tried: str, total: str, free: str, used: str) -> str:
    return (
        f"CUDA out of memory. Tried to allocate {tried} GiB. GPU 0 has a total capacity of "
        f"{total} GiB of which {free} GiB is free. Including non-PyTorch memory, this "
        f"process has {used} GiB memory in use. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )


def cuda_assert_line(file: str, line: int, kernel: str, block: str, thread: str, cond: str) -> str:
    """The line CUDA's device ``__assertfail`` prints."""
    return f"{file}:{line}: {kernel}: block: [{block}], thread: [{thread}] Assertion `{cond}` failed."


LOSS_ASSERT = cuda_assert_line(
    "/pytorch/aten/src/ATen/native/cuda/Loss.cu",
    250,
    "nll_loss_forward_reduce_cuda_kernel_2d",
    "0,0,0",
    "5,0,0",
    "t >= 0 && t < n_classes",
)
LOSS_ASSERT_VALUE = "Loss.cu: nll_loss_forward_reduce_cuda_kernel_2d: Assertion `t >= 0 && t < n_classes` failed"
INDEX_ASSERT = cuda_assert_line(
    "/opt/conda/conda-bld/pytorch_1695392067/work/aten/src/ATen/native/cuda/IndexKernel.cu",
    92,
    "operator()",
    "3,0,0",
    "64,0,0",
    '-sizes[i] <= index && index < sizes[i] && "index out of bounds"',
)

# --------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------

CE = "torch.nn.functional.cross_entropy"


def tm(path="args[0]", dtype="torch.float32", shape=(3, 4), stride=(4, 1), device="cuda:0") -> TensorMeta:
    return TensorMeta(path=path, dtype=dtype, shape=shape, stride=stride, device=device)


def ce_op(**target) -> OpRecord:
    """F.cross_entropy(logits[3, 4] float32, target[3] int64) on cuda:0."""
    tgt = dict(path="args[1]", dtype="torch.int64", shape=(3,), stride=(1,), device="cuda:0")
    tgt.update(target)
    return OpRecord(CE, (tm(), tm(**tgt)), others=("reduction='mean'",))


FRAME = Frame(file="train.py", line=87, function="train_step", source="loss = F.cross_entropy(logits, target)")


def rec(type="IndexError", message="Target 4 is out of bounds.", *, op=None, frame=FRAME, ident=0) -> ExceptionRecord:
    return ExceptionRecord(type=type, message=message, frame=frame, op=op, ident=ident)


def make_sig(
    type="IndexError",
    message="Target 4 is out of bounds.",
    *,
    op="default",
    frame=FRAME,
    kernel=None,
    caught=(),
) -> Signature:
    op = ce_op() if op == "default" else op
    sig = Signature.from_record(rec(type, message, op=op, frame=frame), caught_earlier=caught)
    return dataclasses.replace(sig, kernel_assertion=kernel)
