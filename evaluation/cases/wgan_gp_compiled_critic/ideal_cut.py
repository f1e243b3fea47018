import torch

critic = torch.compile(torch.nn.Linear(2, 1), backend="aot_eager")
x = torch.randn(4, 2, requires_grad=True)
(g,) = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
g.sum().backward()
