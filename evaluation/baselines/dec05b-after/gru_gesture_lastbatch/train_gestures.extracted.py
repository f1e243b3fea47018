import torch

x0 = torch.randn(16, 100, 32).requires_grad_()
x1 = torch.randn(2, 32, 32)
torch.nn.GRU(32, 32, num_layers=2, batch_first=True, dropout=0.1)(x0, x1)
