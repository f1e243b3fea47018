import torch
from torch.nn.utils.rnn import pack_padded_sequence

lengths = torch.full((24,), 103)
lengths[5] = 0
pack_padded_sequence(torch.zeros(24, 103, 20), lengths, batch_first=True, enforce_sorted=False)
