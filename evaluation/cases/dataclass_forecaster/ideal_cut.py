import torch
from torch import nn

# Conv1d(k=5, same padding) -> MaxPool1d(3, stride=2), twice: 96 -> 47 -> 23, not 96 // 4 = 24
x = torch.randn(32, 16 * 23)
nn.Linear(16 * 24, 64)(x)
