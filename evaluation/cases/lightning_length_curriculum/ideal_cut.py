import torch

# conv-stem features of a 128-bp window plus <cls>: (batch, 129, d_model), transposed layout
h = torch.randn(32, 64, 129, requires_grad=True).transpose(1, 2)
pos = torch.nn.Parameter(torch.randn(1, 96 + 1, 64))    # learned positions, max_len = 96
h + pos[:, :129]                                         # the slice stops at 97 rows
