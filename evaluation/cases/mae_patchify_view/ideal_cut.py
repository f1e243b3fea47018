import torch

imgs = torch.rand(64, 3, 32, 32)
x = imgs.view(64, 3, 8, 4, 8, 4).permute(0, 2, 4, 3, 5, 1)   # (B, h, w, p, p, C), non-contiguous
x.view(64, 64, 48)                                         # patchify: needs .reshape
