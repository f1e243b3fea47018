"""Gesture recognition from 3-axis accelerometer windows with a GRU encoder.

    python train_gestures.py [--epochs 3] [--batch-size 32]

The data are synthesised: each gesture class is a different mix of oscillations on
the three axes plus noise, sampled at 50 Hz for 2 s.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split

GESTURES = ["circle", "shake", "tap", "swipe_left", "swipe_right"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--per-class", type=int, default=60)
    return p.parse_args()


def synth_gestures(per_class, steps=100, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 2, steps)
    xs, ys = [], []
    for label, _name in enumerate(GESTURES):
        freq = 1.0 + label * 0.7
        for _ in range(per_class):
            phase = torch.rand(3, generator=g) * 2 * math.pi
            amp = 0.5 + torch.rand(3, generator=g)
            sig = amp[:, None] * torch.sin(2 * math.pi * freq * t[None, :] + phase[:, None])
            if label >= 3:  # swipes drift along x
                sig[0] += (1 if label == 3 else -1) * t
            sig += 0.2 * torch.randn(3, steps, generator=g)
            xs.append(sig.T)  # (steps, 3)
            ys.append(label)
    return torch.stack(xs), torch.tensor(ys)


class GestureGRU(nn.Module):
    def __init__(self, in_dim, hidden, layers, n_classes, batch_size):
        super().__init__()
        self.hidden = hidden
        self.layers = layers
        self.batch_size = batch_size
        self.inp = nn.Sequential(nn.Linear(in_dim, hidden), nn.LayerNorm(hidden), nn.GELU())
        self.rnn = nn.GRU(hidden, hidden, num_layers=layers, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, n_classes)

    def init_hidden(self):
        # zero initial state for every sequence of the batch
        return torch.zeros(self.layers, self.batch_size, self.hidden)

    def forward(self, x):
        h0 = self.init_hidden()
        out, _ = self.rnn(self.inp(x), h0)
        return self.head(out.mean(dim=1))


def standardise(train_x, *others):
    mean = train_x.mean(dim=(0, 1), keepdim=True)
    std = train_x.std(dim=(0, 1), keepdim=True) + 1e-6
    return [(t - mean) / std for t in (train_x, *others)]


def run_epoch(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    total, correct, loss_sum = 0, 0, 0.0
    with torch.set_grad_enabled(training):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if training:
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            loss_sum += loss.item() * y.numel()
            correct += (logits.argmax(-1) == y).sum().item()
            total += y.numel()
    return loss_sum / total, correct / total


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    x, y = synth_gestures(args.per_class, seed=args.seed)
    full = TensorDataset(x, y)
    n_val = len(full) // 5
    train_set, val_set = random_split(full, [len(full) - n_val, n_val],
                                      generator=torch.Generator().manual_seed(args.seed))
    tx = torch.stack([train_set[i][0] for i in range(len(train_set))])
    ty = torch.stack([train_set[i][1] for i in range(len(train_set))])
    vx = torch.stack([val_set[i][0] for i in range(len(val_set))])
    vy = torch.stack([val_set[i][1] for i in range(len(val_set))])
    tx, vx = standardise(tx, vx)
    train_loader = DataLoader(TensorDataset(tx, ty), batch_size=args.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(TensorDataset(vx, vy), batch_size=args.batch_size)
    print(f"train {len(tx)}  val {len(vx)}  classes {len(GESTURES)}")

    model = GestureGRU(3, args.hidden, args.layers, len(GESTURES), args.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
    for epoch in range(args.epochs):
        t0 = time.time()
        tr_loss, tr_acc = run_epoch(model, train_loader, optimizer)
        va_loss, va_acc = run_epoch(model, val_loader)
        print(f"epoch {epoch}: train {tr_loss:.3f}/{tr_acc:.2%}  val {va_loss:.3f}/{va_acc:.2%}"
              f"  ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
