"""A Keras-flavoured fit()/evaluate() wrapper around DDP, for the credit-risk model.

    torchrun --nproc_per_node=2 --standalone fit_keras_style.py --epochs 40 --patience 3
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class EarlyStopping:
    def __init__(self, patience, min_delta=0.0):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.bad_epochs = float("inf"), 0

    def step(self, value):
        if value < self.best - self.min_delta:
            self.best, self.bad_epochs = value, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs > self.patience


class History:
    def __init__(self, path):
        self.path, self.rows = path, []

    def add(self, **row):
        self.rows.append(row)

    def dump(self):
        with open(self.path, "w") as f:
            json.dump(self.rows, f, indent=1)


class Model:
    def __init__(self, net):
        self.rank = dist.get_rank()
        self.net = DistributedDataParallel(net)
        self.optimizer = self.loss = None

    def compile(self, optimizer, loss, lr):
        self.optimizer = optimizer(self.net.parameters(), lr=lr)
        self.loss = loss

    def train_on_batch(self, x, y):
        self.optimizer.zero_grad()
        loss = self.loss(self.net(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self, loader):
        self.net.eval()
        total, n = 0.0, 0
        for x, y in loader:
            total += self.loss(self.net.module(x), y).item() * len(y)
            n += len(y)
        self.net.train()
        return total / n

    def fit(self, train_loader, val_loader, epochs, callbacks=None, history=None, verbose=1):
        stopper = (callbacks or {}).get("early_stopping")
        for epoch in range(epochs):
            t0 = time.time()
            train_loader.sampler.set_epoch(epoch)
            losses = [self.train_on_batch(x, y) for x, y in train_loader]
            val_loss = self.evaluate(val_loader)
            if history is not None:
                history.add(epoch=epoch, loss=sum(losses) / len(losses), val_loss=val_loss)
            if verbose:
                print(f"[rank {self.rank}] Epoch {epoch + 1}/{epochs} - loss: {sum(losses) / len(losses):.4f}"
                      f" - val_loss: {val_loss:.4f} - {time.time() - t0:.2f}s", flush=True)
            if stopper is not None and stopper.step(val_loss):
                print(f"[rank {self.rank}] early stopping at epoch {epoch + 1}", flush=True)
                break
        return history

    def save(self, path):
        if self.rank == 0:
            torch.save(self.net.module.state_dict(), path)


def credit_data(n, n_features, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    w = torch.randn(n_features, generator=g) * (torch.rand(n_features, generator=g) < 0.3)
    logits = x @ w + 0.5 * x[:, 0] * x[:, 1] + 0.8 * torch.randn(n, generator=g)
    return x, (logits > 0).float().unsqueeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=700)
    ap.add_argument("--features", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", default="credit_model.pt")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    x, y = credit_data(args.n, args.features, args.seed)
    n_val = args.n // 5
    train_ds, val_ds = TensorDataset(x[n_val:], y[n_val:]), TensorDataset(x[:n_val], y[:n_val])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size,
                              sampler=DistributedSampler(train_ds, shuffle=True, seed=args.seed))
    # each rank validates on its own half of the validation set
    val_loader = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))

    net = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(),
                        nn.Linear(args.hidden, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
    model = Model(net)
    model.compile(torch.optim.Adam, nn.BCEWithLogitsLoss(), args.lr)
    history = model.fit(train_loader, val_loader, args.epochs,
                        callbacks={"early_stopping": EarlyStopping(args.patience)},
                        history=History(f"history_rank{dist.get_rank()}.json"))
    history.dump()
    model.save(args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
