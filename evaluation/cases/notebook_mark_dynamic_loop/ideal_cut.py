import torch


@torch.compile(backend="eager")
def f(x):
    return torch.stack([w for w in x])


x = torch.randn(4, 3)
torch._dynamo.mark_dynamic(x, 0)
f(x)
