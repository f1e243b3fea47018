import torch

# rotary tables built for the 33-token block of the training split (<= 22 actions);
# beam search on the length-split test set grows 16 prompts x 4 beams to 34 tokens
cos = torch.randn(33, 24)
qkv = torch.randn(64, 34, 3 * 96)                               # Block.qkv(ln1(x))
q = qkv[..., :96].view(64, 34, 4, 24).transpose(1, 2)           # (B, heads, T, head_dim)
q * cos[:34]
