import torch
from torch.nn.utils.rnn import pack_padded_sequence

h = torch.randn(32, 24, 64)                       # padded batch, already sorted longest-first
lengths = torch.arange(32) % 6 + 19               # ...but lengths kept in the original, unsorted order
pack_padded_sequence(h, lengths, batch_first=True)
