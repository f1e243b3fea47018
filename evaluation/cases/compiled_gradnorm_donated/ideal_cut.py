import torch

w = torch.randn(64, 64, requires_grad=True)
f = torch.compile(lambda x: torch.tanh(x @ w).sin())
f(torch.randn(2, 64)).sum().backward()
torch.autograd.grad(f(torch.randn(2, 64)).sum(), w, retain_graph=True)
