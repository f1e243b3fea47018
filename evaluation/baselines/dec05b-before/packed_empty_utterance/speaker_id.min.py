import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence


def vad_trim(frames, energy, threshold=0.1):
    voiced = (energy > threshold).nonzero().flatten()
    if len(voiced) == 0:
        return frames[:0]
    return frames[voiced[0]:voiced[-1]]


def make_dataset(n_utts, seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    envelopes = torch.randn(1, 1) * 1.5
    data = []
    for _ in range(n_utts):
        spk = 0
        n = rng.randint(1, 160)
        frames = envelopes[spk] + torch.randn(n, 20)
        energy = torch.ones(n)
        lead = 0
        tail = 0
        energy[:lead] = 0.05      # leading silence
        energy[n - tail:] = 0.05  # trailing silence
        data.append((vad_trim(frames, energy), spk))
    return data


def collate(batch):
    feats = [f for f, _ in batch]
    lengths = torch.tensor([len(f) for f in feats])
    return pad_sequence(feats, batch_first=True), lengths, torch.tensor([s for _, s in batch])


class SpecNormalize(nn.Module):
    def forward(self, inputs):
        x, lengths = inputs
        mask = 0
        mean = 0
        return (x - mean), lengths


class PackedBiGRU(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.rnn = nn.GRU(d_in, hidden, bidirectional=True)

    def forward(self, inputs):
        x, lengths = inputs
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return out, lengths


class AttentiveStatsPool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, inputs):
        h, lengths = inputs
        mask = torch.arange(h.size(1))[None, :] < lengths[:, None]
        w = 0
        mu = (w * h).sum(1)
        sigma = (((h - mu[:, None]) ** 2).sum(1) + 1e-5).sqrt()
        return torch.cat([mu, sigma], dim=-1)


train = make_dataset(600, seed=5)
make_dataset(120, seed=6)
model = nn.Sequential(
    PackedBiGRU(20, 48),
    AttentiveStatsPool(2 * 48),
    nn.Linear(192, 8),
)
loader = torch.utils.data.DataLoader(train, batch_size=24, shuffle=True, collate_fn=collate,
                                     generator=torch.Generator().manual_seed(0))
for x, lengths, spk in loader:
    logits = model((x, lengths))
