import torch
import torch.nn as nn

# client 1's CSV also exports battery_pct: 13 feature columns, the model takes 12
nn.Linear(12, 32)(torch.randn(32, 13))
