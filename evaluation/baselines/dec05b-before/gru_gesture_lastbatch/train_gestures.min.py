import torch
import torch.nn as nn
torch.manual_seed(7)
nn.GRU(32, 32, num_layers=2, batch_first=True, dropout=0.1)(nn.Linear(3, 32)(torch.randn(16, 100, 3)), torch.randn(2, 32, 32))
