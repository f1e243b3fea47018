import torch


def step(x):
    x.sum().backward()


torch.compile(step, fullgraph=True)(torch.ones(2, requires_grad=True))
