"""A device-side assert as CUDA reports it, on a machine without a GPU.

On CUDA the class-index bug of the field guide goes like this: the loss kernel is
launched, the device prints its assertion (``t >= 0 && t < n_classes``) and the error
is reported later, at the next call that synchronises (here ``loss.item()``), as
``torch.AcceleratorError: CUDA error: device-side assert triggered``.  With
``CUDA_LAUNCH_BLOCKING=1`` launches are synchronous and the same error is reported at the
loss itself.  ``DeviceTensor`` makes torch calls behave that way on the CPU: the loss
"kernel" prints the assertion and poisons the context; the error surfaces at the next
call on a poisoned tensor, or at once under synchronous launches.
"""

import os
import sys

import torch
import torch.nn.functional as F

SYNC = os.environ.get("CUDA_LAUNCH_BLOCKING") == "1"
ASSERTION = (
    "/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: "
    "block: [0,0,0], thread: [2,0,0] Assertion `t >= 0 && t < n_classes` failed."
)
MESSAGE = (
    "CUDA error: device-side assert triggered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


class DeviceTensor(torch.Tensor):
    poisoned = False

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if DeviceTensor.poisoned:
            raise torch.AcceleratorError(MESSAGE)
        if func is F.cross_entropy:
            logits, target = args[0].as_subclass(torch.Tensor), args[1].as_subclass(torch.Tensor)
            n_classes = logits.shape[-1]
            if bool(((target < 0) | (target >= n_classes)).any()):
                print(ASSERTION, file=sys.stderr, flush=True)
                DeviceTensor.poisoned = True
                if SYNC:
                    raise torch.AcceleratorError(MESSAGE)
                target = target.clamp(0, n_classes - 1)  # the launch returns; the result is garbage
            with torch._C.DisableTorchFunctionSubclass():
                return F.cross_entropy(logits, target, **kwargs).as_subclass(DeviceTensor)
        return super().__torch_function__(func, types, args, kwargs)


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    inputs = torch.randn(6, 8)
    labels = torch.tensor([1, 2, 3, 4, 1, 2])  # one annotation source counts 1..4
    for step in range(3):
        logits = model(inputs).as_subclass(DeviceTensor)
        loss = F.cross_entropy(logits, labels.as_subclass(DeviceTensor))
        print(f"step {step} loss {loss.item():.4f}")


main()
