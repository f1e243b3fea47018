import torch

x0 = torch.randn(24, 103, 20)
x1 = torch.tensor([103, 94, 89, 71, 69, 63, 61, 60, 57, 53, 49, 48, 46, 46, 43, 40, 37, 26, 19, 19, 18, 4, 0, 0], dtype=torch.int64)
torch._pack_padded_sequence(x0, x1, True)
