"""Clip model scores before a softmax, with the bounds written as NumPy constants."""
import numpy as np
import torch

scores = torch.randn(4, 10) * 50
low, high = -np.Inf, 30.0
clipped = torch.clamp(scores, min=float(low), max=high)
print(torch.softmax(clipped, dim=1).sum(dim=1))
