import torch


@torch.library.custom_op("repro::op", mutates_args=())
def op(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


torch.compile(lambda x: op(x))(torch.randn(2))
