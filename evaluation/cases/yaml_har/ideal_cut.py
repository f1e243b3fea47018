import torch
import torch.nn as nn

conv = nn.Conv1d(3, 32, 5, padding=2)   # model.in_channels: 3
x = torch.randn(64, 4, 128)             # data.channels lists 4 sensors
conv(x)
