# python ideal_cut.py   (no ranks needed: the bad label is data, not distribution)
# 6 intents (ids 0..5); an unknown intent was mapped to len(intents) == 6.
import torch
import torch.nn.functional as F

F.cross_entropy(torch.randn(2, 6), torch.tensor([0, 6]))  # IndexError: Target 6 is out of bounds.
