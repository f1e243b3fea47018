import torch


@torch.compile(fullgraph=True)
def f(h):
    if h.mean() > 0:
        h = h + 1
    return h


f(torch.randn(4))
