import torch

attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
keys = torch.randn(352, 32).expand(32, -1, -1)
values = torch.randn(320, 32).expand(32, -1, -1)
attn(torch.randn(32, 8, 32), keys, values, need_weights=False)
