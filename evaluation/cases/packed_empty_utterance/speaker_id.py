"""Speaker identification from variable-length MFCC frames.

The pipeline is an nn.Sequential of stages that pass (features, lengths) along:
    SpecNormalize -> PackedBiGRU -> AttentiveStatsPool -> classifier
Utterances are simulated: each speaker has a characteristic spectral envelope; the
voice-activity detector trims silence at both ends before batching.
"""
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

N_MFCC = 20
N_SPEAKERS = 8


def simulate_utterance(speaker, rng, envelopes):
    n = rng.randint(40, 160)
    frames = envelopes[speaker] + 0.8 * torch.randn(n, N_MFCC)
    energy = torch.ones(n)
    lead, tail = rng.randint(0, 30), rng.randint(0, 30)
    energy[:lead] = 0.05      # leading silence
    energy[n - tail:] = 0.05  # trailing silence
    return frames * energy[:, None], energy


def vad_trim(frames, energy, threshold=0.1):
    """Keep the frames between the first and the last voiced frame."""
    voiced = (energy > threshold).nonzero().flatten()
    if len(voiced) == 0:
        return frames[:0]
    return frames[voiced[0]:voiced[-1] + 1]


def make_dataset(n_utts, seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    envelopes = torch.randn(N_SPEAKERS, N_MFCC) * 1.5
    data = []
    for _ in range(n_utts):
        spk = rng.randrange(N_SPEAKERS)
        frames, energy = simulate_utterance(spk, rng, envelopes)
        data.append((vad_trim(frames, energy), spk))
    return data


def collate(batch):
    feats = [f for f, _ in batch]
    lengths = torch.tensor([len(f) for f in feats])
    return pad_sequence(feats, batch_first=True), lengths, torch.tensor([s for _, s in batch])


class SpecNormalize(nn.Module):
    def forward(self, inputs):
        x, lengths = inputs
        mask = (torch.arange(x.size(1))[None, :] < lengths[:, None]).unsqueeze(-1)
        mean = (x * mask).sum(1, keepdim=True) / lengths.clamp(min=1)[:, None, None]
        return (x - mean) * mask, lengths


class PackedBiGRU(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.rnn = nn.GRU(d_in, hidden, batch_first=True, bidirectional=True)

    def forward(self, inputs):
        x, lengths = inputs
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        return out, lengths


class AttentiveStatsPool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, inputs):
        h, lengths = inputs
        mask = torch.arange(h.size(1))[None, :] < lengths[:, None]
        w = self.score(h).squeeze(-1).masked_fill(~mask, float("-inf")).softmax(-1).unsqueeze(-1)
        mu = (w * h).sum(1)
        sigma = ((w * (h - mu[:, None]) ** 2).sum(1) + 1e-5).sqrt()
        return torch.cat([mu, sigma], dim=-1)


def build_model(hidden=48):
    return nn.Sequential(
        SpecNormalize(),
        PackedBiGRU(N_MFCC, hidden),
        AttentiveStatsPool(2 * hidden),
        nn.Linear(4 * hidden, N_SPEAKERS),
    )


def main():
    train = make_dataset(600, seed=5)
    val = make_dataset(120, seed=6)
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = torch.utils.data.DataLoader(train, batch_size=24, shuffle=True, collate_fn=collate,
                                         generator=torch.Generator().manual_seed(0))
    val_loader = torch.utils.data.DataLoader(val, batch_size=60, collate_fn=collate)
    for epoch in range(4):
        t0, model_loss = time.time(), 0.0
        model.train()
        for step, (x, lengths, spk) in enumerate(loader):
            logits = model((x, lengths))
            loss = F.cross_entropy(logits, spk)
            opt.zero_grad()
            loss.backward()
            opt.step()
            model_loss += loss.item()
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, lengths, spk in val_loader:
                correct += (model((x, lengths)).argmax(-1) == spk).sum().item()
        print(f"epoch {epoch}: loss {model_loss / (step + 1):.3f}  val acc {correct / len(val):.3f}"
              f"  ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
