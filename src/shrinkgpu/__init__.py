"""shrinkgpu: reduce a failing PyTorch script to a minimal one with the same first error."""

from shrinkgpu.signature import Signature, Strictness

__version__ = "0.1.0"

__all__ = ["Signature", "Strictness", "__version__", "reduce", "run_once", "ReduceConfig"]


def __getattr__(name):
    # The reducer pulls in libcst and the worker layer; keep ``import shrinkgpu`` light
    # (the supervisor imports this package before it preloads anything).
    if name in ("reduce", "run_once", "ReduceConfig", "ReductionResult"):
        from shrinkgpu import reducer

        return getattr(reducer, name)
    raise AttributeError(name)
