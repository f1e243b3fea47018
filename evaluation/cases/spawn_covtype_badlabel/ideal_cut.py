import torch
import torch.nn as nn

# Cover_Type is 1-based in the survey (1-7); one re-surveyed plot is coded 8
target = torch.tensor([int("8") - 1])
nn.CrossEntropyLoss()(torch.randn(1, 7), target)
