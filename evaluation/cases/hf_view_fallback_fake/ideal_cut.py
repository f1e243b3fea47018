import torch


def f(x):
    try:
        return x.view(-1)
    except RuntimeError:
        return x.reshape(-1)


torch.compile(f, fullgraph=True)(torch.ones(2, 3).t())
