import torch

scores = torch.randn(32, 4, 10, 10)                              # batch padded to its longest sentence (10)
pad_mask = torch.arange(32)[None, :] >= torch.full((32, 1), 7)    # mask built for MAX_LEN = 32
scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
