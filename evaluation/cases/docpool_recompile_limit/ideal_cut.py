import torch

torch._dynamo.config.fail_on_recompile_limit_hit = True


@torch.compile(backend="eager")
def f(xs):
    return torch.stack(xs)


for n in range(1, 10):
    f([torch.randn(2)] * n)
