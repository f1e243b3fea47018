import torch
import torch.nn as nn

f = nn.Linear(4, 4)
state = torch.randn(128, 4)
for _ in range(20):
    state += 0.05 * f(state)   # Linear saved `state` for its weight gradient
state.pow(2).mean().backward()
